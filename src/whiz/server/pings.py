"""A WebSocket client that pings without reading cannot grow the server.

uvicorn answers every ping with a pong written straight to the socket, whatever the send buffer
holds: a client that floods pings and never reads grew the server by hundreds of MB a minute, even
before its key was checked (and after the server had sent its close). The server's own messages
wait while the buffer is above its high-water mark (asyncio's flow control); pongs get the same
rule here: while the client is not reading, a ping gets no pong (RFC 6455 lets an endpoint answer
only the latest ping), and a client that sends `max_unanswered_pings` of them is disconnected.

Each ping costs a frame to parse whether or not it is answered, so a client that pings faster than
`PINGS_PER_S` (past a burst of `PING_BURST`) is closed with 1008, reading or not. Once the server
has sent its close, pings get no pong either, and the socket no longer counts toward the
connection cap while it waits (3 s) for the client's close. A client that reads nothing at all
for `send_timeout_s` while the server has data for it is let go (`stalls.py`).
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from whiz.server.stalls import SEND_TIMEOUT_S, StallTimer
from whiz.server.waiting import WaitingConnections

MAX_UNANSWERED_PINGS = 64
PING_BURST = 100
PINGS_PER_S = 10.0
"""A client's pings, as a token bucket: keep-alives come every few seconds; more than this is a
flood, and each ping costs the server a frame to parse whether or not it answers it."""
AFTER_CLOSE_BYTES = 64 * 1024
"""What a client may still send once the server has closed: its own close frame, and what was in
flight. Not a message of up to `ws_max_size` that the parser would hold only to drop it."""
CLOSE_TIMEOUT_S = 3.0
"""How long a closed WebSocket waits for the client's close frame (uvicorn waits 10 s)."""


class PingBoundProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol with pongs under flow control and a send timeout
    (set per server by `ping_bound_protocol`)."""

    max_unanswered_pings = MAX_UNANSWERED_PINGS

    send_timeout_s = SEND_TIMEOUT_S
    waiting: WaitingConnections | None = None

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any], _loop: Any = None):
        super().__init__(config, server_state, app_state, _loop)
        self.unanswered_pings = 0
        self._ping_tokens = float(PING_BURST)
        self._ping_at = self.loop.time()
        self.stall = StallTimer(self.loop, self.send_timeout_s, self._drop_unread)
        self.close_timeout = CLOSE_TIMEOUT_S
        self.after_close_bytes = 0

    def data_received(self, data: bytes) -> None:
        if self.close_sent:
            self.after_close_bytes += len(data)
            if self.after_close_bytes > AFTER_CLOSE_BYTES:
                self.transport.abort()
                return
        super().data_received(data)

    async def send(self, message: Any) -> None:
        await super().send(message)
        if self.close_sent and self.waiting is not None and not self.transport.is_closing():
            self.waiting.closing(self)

    def pause_writing(self) -> None:
        self.stall.paused()
        super().pause_writing()

    def resume_writing(self) -> None:
        self.stall.resumed()
        super().resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.stall.resumed()
        if self.waiting is not None:
            self.waiting.start(self)
        super().connection_lost(exc)

    def _refuse_flood(self) -> None:
        """Close with 1008 (policy violation): the client pings faster than any keep-alive."""
        self.conn.data_to_send()  # the pongs queued for this flood are not sent
        if self.close_sent or self.transport.is_closing():
            self.transport.abort()
            return
        self.logger.info("closing a WebSocket that sends more than %g pings a second", PINGS_PER_S)
        self.conn.fail(1008, "too many pings")
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = True
        self.transport.close()

    def _drop_unread(self) -> None:
        if not self.transport.is_closing():
            self.logger.info("closing a WebSocket that has read nothing for %g s", self.send_timeout_s)
            self.transport.abort()

    def handle_ping(self) -> None:
        now = self.loop.time()
        self._ping_tokens = min(float(PING_BURST), self._ping_tokens + (now - self._ping_at) * PINGS_PER_S)
        self._ping_at = now
        self._ping_tokens -= 1
        if self._ping_tokens < 0:
            self._refuse_flood()
            return
        if self.writable.is_set() and not self.close_sent:
            self.unanswered_pings = 0
            super().handle_ping()
            return
        # The pongs the parser queued (and anything queued with them: the buffer is full, the
        # client is not reading) are dropped rather than buffered without end.
        self.conn.data_to_send()
        self.unanswered_pings += 1
        if self.unanswered_pings >= self.max_unanswered_pings and not self.transport.is_closing():
            self.logger.info("closing a WebSocket that sends pings and reads nothing")
            self.transport.abort()


def ping_bound_protocol(send_timeout_s: float, waiting: WaitingConnections) -> type[PingBoundProtocol]:
    """The protocol class for `uvicorn.Config(ws=...)`, over one server's waiting connections."""
    attrs = {"send_timeout_s": send_timeout_s, "waiting": waiting}
    return type("WhizWebSocketProtocol", (PingBoundProtocol,), attrs)
