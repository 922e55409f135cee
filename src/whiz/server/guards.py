"""What every request passes before its route: the Host and Origin check, the drain, and the key.

The key check is not something a route calls: `require_keys` wraps every route of the app when it
is built, except the few on `PUBLIC_PATHS`, so a route added later is keyed without anyone
remembering to. A route reads the key that was checked with `checked_key`.
"""

from __future__ import annotations

import json

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from whiz.errors import Forbidden, WhizError
from whiz.server.auth import KEY_SCOPE, TENANT_HEADER, TENANT_KEPT_HEADER, bearer
from whiz.server.browser import FORBIDDEN_CLOSE_CODE, SUBPROTOCOL, BrowserGuard, key_from_subprotocols
from whiz.server.messages import MESSAGES_PATH
from whiz.server.messages import error_response as anthropic_error
from whiz.server.state import ServerState

PUBLIC_PATHS = frozenset(
    {
        "/health",  # load balancers and the gateway probe it without a key
        "/whiz/codex/models.json",  # says only what the model is; the Codex CLI reads it as a file
        "/",  # the web app's page, its files and what it needs to know before it has a key:
        "/static",  # none holds data, and the page asks for the key
        "/whiz/info",
    }
)
"""Routes that answer without a key on a server with keys. Every other route of the app, the
browser app's and any added later included, refuses a missing or wrong key with 401 (or an
`error` event and close 1008 on a WebSocket) before it reads a body or does any work."""


def error_response(exc: WhizError) -> JSONResponse:
    headers = {"Retry-After": "1"} if exc.status in (429, 503) else None
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.status, headers=headers)


def error_response_at(path: str, exc: WhizError) -> JSONResponse:
    """The error in the shape the route's clients read: Anthropic's on the Messages routes (its
    SDK shows `error.message` from that shape only), OpenAI's everywhere else."""
    if is_messages(path):
        return anthropic_error(exc)
    return error_response(exc)


def is_messages(path: str) -> bool:
    return path == MESSAGES_PATH or path.startswith(MESSAGES_PATH + "/")


def presented_key(scope: Scope) -> str | None:
    """The key a request carries: `Authorization: Bearer`; Anthropic's `x-api-key` first on the
    Messages routes; a browser's `whiz-key.` subprotocol on a WebSocket."""
    headers = Headers(scope=scope)
    if scope["type"] == "websocket":
        return bearer(headers.get("authorization")) or key_from_subprotocols(scope.get("subprotocols") or [])
    if is_messages(scope["path"]):
        return headers.get("x-api-key") or bearer(headers.get("authorization"))
    return bearer(headers.get("authorization"))


async def refuse_socket(ws: WebSocket, exc: WhizError) -> None:
    """Accept (a browser reads no close reason otherwise), say why in an `error` event, and close."""
    if ws.client_state.name == "CONNECTING":
        offered = ws.scope.get("subprotocols") or []
        await ws.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
    await ws.send_text(json.dumps({"type": "error", "status": exc.status, "error": exc.to_dict()}))
    code = {403: FORBIDDEN_CLOSE_CODE, 503: 1013, 429: 1013}.get(exc.status, 1008)  # 1013: try again later
    await ws.close(code=code, reason=exc.code)


class KeyRequired:
    """One route's app, behind the key check (see `require_keys`)."""

    def __init__(self, app: ASGIApp, state: ServerState):
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = presented_key(scope)
        try:
            if scope["type"] == "websocket":
                # A WebSocket's origin is checked here too (HTTP's is, before any route), so a
                # refused page learns that, not whether its key was right.
                self.state.browser.check(Headers(scope=scope), scope.get("scheme", "ws"))
            self.state.keys.check(key)
        except WhizError as exc:
            self.state.metrics.error(exc.code)
            if scope["type"] == "websocket":
                await refuse_socket(WebSocket(scope, receive, send), exc)
            else:
                await error_response_at(scope["path"], exc)(scope, receive, send)
            return
        scope[KEY_SCOPE] = key
        if (
            scope["type"] == "http"
            and TENANT_HEADER in Headers(scope=scope)
            and self.state.keys.names_tenants(key)
            # A gateway keeps a tenant apart only as far as its own upstreams do.
            and getattr(self.state.backend, "keeps_tenants", True)
        ):
            send = _saying_tenant_kept(send)
        await self.app(scope, receive, send)


def _saying_tenant_kept(send: Send) -> Send:
    """`send`, with `X-Whiz-Tenant-Kept: 1` on the response: this server filed the request under
    the tenant it named, so a gateway may report its cache hits to that tenant (gateway/upstream.py)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {
                **message,
                "headers": [*message.get("headers", []), (TENANT_KEPT_HEADER.encode(), b"1")],
            }
        await send(message)

    return sending


def require_keys(routes: list[BaseRoute], state: ServerState) -> list[BaseRoute]:
    """Every route in `routes` behind the key check, but those on `PUBLIC_PATHS`. Routing is
    untouched: an unknown path is still a 404 and a wrong method a 405."""
    for route in routes:
        if not isinstance(route, Route | WebSocketRoute | Mount):
            raise TypeError(f"no key check for a {type(route).__name__}: add it to require_keys")
        if route.path not in PUBLIC_PATHS:
            route.app = KeyRequired(route.app, state)
    return routes


class HostAndOrigin:
    """Every HTTP request: its Host on the allow-list, and its Origin, when a browser sent one, this
    server's own (or allow-listed). Without it any web page could spend this server's compute.
    WebSockets are checked before their route (`KeyRequired`), which answers with an error event
    and a close code."""

    def __init__(self, app: ASGIApp, guard: BrowserGuard):
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            try:
                self.guard.check(headers, scope.get("scheme", "http"))
            except Forbidden as exc:
                await error_response_at(scope["path"], exc)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Draining:
    """While the server drains (SIGTERM), every new HTTP request gets a 503 with `Retry-After` at
    once (`/health` says "draining" itself); the requests it lets in are counted, so the drain
    knows when none is left."""

    def __init__(self, app: ASGIApp, state: ServerState):
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.state.draining and scope["path"] != "/health":
            try:
                self.state.check_open()
            except WhizError as exc:
                response = error_response_at(scope["path"], exc)
                response.headers["Connection"] = "close"
                await response(scope, receive, send)
                return
        self.state.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.state.in_flight -= 1
