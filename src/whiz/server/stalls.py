"""A client that stops reading is let go: nginx's `send_timeout`.

A stream whose client never reads fills the socket's buffers; uvicorn then waits for room, and
the connection, counted toward the connection cap, waits with it forever. Both protocols (HTTP
and WebSocket) are told by asyncio when their buffer passes its high-water mark and when it
drains; if it has not drained `timeout_s` later, the connection is dropped, which ends the
request (and cancels its turn) as a client that hangs up does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

SEND_TIMEOUT_S = 60.0


class StallTimer:
    """Runs `on_stall` once the client has read nothing for `timeout_s` while data waits for it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float, on_stall: Callable[[], None]):
        self.loop = loop
        self.timeout_s = timeout_s
        self.on_stall = on_stall
        self._timer: asyncio.TimerHandle | None = None

    def paused(self) -> None:
        """The send buffer passed its high-water mark."""
        if self._timer is None:
            self._timer = self.loop.call_later(self.timeout_s, self._stalled)

    def resumed(self) -> None:
        """The client read: the buffer drained below its low-water mark."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _stalled(self) -> None:
        self._timer = None
        self.on_stall()
