"""How the server listens: uvicorn's configuration, with every connection limit in one place.

`whiz serve` and the tests' servers both start uvicorn from `uvicorn_config`, so what the tests
see is what a user runs. The limits, their values and what a client sees are in
docs/limits-connections.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.types import Receive, Scope, Send

from whiz.config import ServeSettings
from whiz.server.guards import error_response_at
from whiz.server.http import Unavailable
from whiz.server.pings import ping_bound_protocol
from whiz.server.waiting import WaitingConnections, WaitingLimits, waiting_protocol

if TYPE_CHECKING:
    from whiz.server.state import ServerState

log = logging.getLogger("whiz.server")

EXIT_MARGIN_S = 1.5
"""After SIGTERM, the most the process outlives its grace (3 s by default: 4.5 s in all)."""


def waiting_limits(settings: ServeSettings) -> WaitingLimits:
    return WaitingLimits(
        header_timeout_s=settings.header_timeout_s,
        max_waiting_per_address=settings.max_waiting_per_address,
        max_waiting=settings.max_waiting,
        send_timeout_s=settings.send_timeout_s,
    )


def at_capacity(limit: int, state: ServerState | None = None):
    """The answer to a request past `max_connections`: a 503 in the route's error shape, with
    `Retry-After`, and the connection closed (uvicorn's own is plain text with no hint when to
    come back)."""

    async def busy(scope: Scope, receive: Receive, send: Send) -> None:
        exc = Unavailable(
            f"The server holds its most connections ({limit}); retry shortly.", code="too_many_connections"
        )
        if state is not None:
            state.metrics.error(exc.code)
        response = error_response_at(scope.get("path", ""), exc)  # with Retry-After
        response.headers["Connection"] = "close"
        await response(scope, receive, send)

    return busy


def uvicorn_config(
    app: Any, settings: ServeSettings, state: ServerState | None = None, **overrides: Any
) -> uvicorn.Config:
    """uvicorn's configuration for `app` under `settings`; `overrides` are uvicorn's own options.
    With the app's `state`, /metrics counts the connections let go (`Metrics.connections`)."""
    waiting = WaitingConnections(waiting_limits(settings))
    if state is not None:
        state.metrics.connections = waiting
    options: dict[str, Any] = dict(
        host=settings.host,
        port=settings.port,
        log_level="warning",
        http=waiting_protocol(waiting, at_capacity(settings.max_connections, state)),
        ws=ping_bound_protocol(settings.send_timeout_s, waiting),
        timeout_graceful_shutdown=settings.shutdown_grace_s,
        limit_concurrency=settings.max_connections,
        timeout_keep_alive=settings.keep_alive_s,
        # A WebSocket message larger than a request body would be refused anyway: stop it at the door.
        ws_max_size=int(settings.max_body_mb * 1024 * 1024) + 1024,
    )
    return uvicorn.Config(app, **(options | overrides))


class DrainingServer(uvicorn.Server):
    """uvicorn that drains on SIGTERM or Ctrl-C before it stops.

    uvicorn closes its listening socket first, so a client that connects during the shutdown is
    refused, and a load balancer learns nothing. Here the app is marked as draining and the socket
    stays open: every new request gets a 503 with `Retry-After` at once, while running requests
    and WebSocket turns get what is left of `timeout_graceful_shutdown` (the grace) to finish.
    Then uvicorn's own shutdown closes the socket and cancels what still runs, which cancels its
    turns in the engine. The grace counts from the signal, not from each step.
    """

    def __init__(self, config: uvicorn.Config, state: ServerState | None):
        super().__init__(config)
        self.whiz_state = state
        self._deadline: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.whiz_state is not None:
            self.whiz_state.draining = True
        if self._deadline is None:
            # The exit time is a promise, not a hope: past the grace and a margin for cancelling
            # and unwinding (a decode step, a busy machine), the process ends itself, as a
            # supervisor's SIGKILL would.
            grace_s = float(self.config.timeout_graceful_shutdown or 0)
            self._deadline = threading.Timer(grace_s + EXIT_MARGIN_S, self._overran)
            self._deadline.daemon = True
            self._deadline.start()
        super().handle_exit(sig, frame)

    def _overran(self) -> None:
        log.error("the drain overran its grace by %g s: exiting now", EXIT_MARGIN_S)
        logging.shutdown()
        os._exit(1)

    def stop(self) -> None:
        """Drain and stop, as on SIGTERM (`--idle-exit`)."""
        if self.whiz_state is not None:
            self.whiz_state.draining = True
        self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        loop = asyncio.get_running_loop()
        grace_s = float(self.config.timeout_graceful_shutdown or 0)
        deadline = loop.time() + grace_s
        state = self.whiz_state
        while state is not None and state.busy() and loop.time() < deadline and not self.force_exit:
            await asyncio.sleep(0.05)
        self.config.timeout_graceful_shutdown = max(0.0, deadline - loop.time())  # type: ignore[assignment]
        await super().shutdown(sockets)
