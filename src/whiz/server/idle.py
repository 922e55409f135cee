"""Knowing when a server has nothing to do: a background `whiz serve --idle-exit` ends itself then."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Receive, Scope, Send

UNWATCHED_PATHS = frozenset({"/health", "/metrics"})
"""Probes: a client checking whether the server is there is not using it."""


class IdleWatch:
    """An ASGI wrapper that counts the requests and connections in flight, and when the last ended."""

    def __init__(self, app: ASGIApp):
        self.app = app
        self.active = 0
        self.last_activity = time.monotonic()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") in UNWATCHED_PATHS:
            await self.app(scope, receive, send)
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
            self.last_activity = time.monotonic()

    def idle_s(self) -> float:
        """Seconds since the last request or connection ended; 0 while one is open."""
        return 0.0 if self.active else time.monotonic() - self.last_activity
