"""`create_app(backend, settings, routes=())`: the Starlette app with every route of docs/protocol.md.

The app runs turns on a `Backend`: an in-process engine (wrapped in `EngineBackend`) or, for
`whiz serve --upstream`, the gateway over OpenAI-compatible servers. It is the model API and
nothing else: the browser app's routes come from above (`whiz.web.app.browser_app`), handed in by the
command that serves them, so this package imports nothing from the agent, the UI or the web app.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TypeVar

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from whiz import __version__
from whiz.backend.engine import EngineBackend
from whiz.config import ServeSettings
from whiz.errors import Forbidden, InvalidRequest, NotFound, WhizError
from whiz.seams import Backend, Engine
from whiz.server.auth import bearer, named_tenant
from whiz.server.browser import FORBIDDEN_CLOSE_CODE, SUBPROTOCOL, BrowserGuard, key_from_subprotocols
from whiz.server.codex import codex_routes
from whiz.server.completions import completions_routes
from whiz.server.http import ClientGone, run_to_end, until_disconnected
from whiz.server.messages import MESSAGES_PATH, messages_routes
from whiz.server.messages import error_response as anthropic_error
from whiz.server.protocol import ChatRequest, ResponsesRequest, parse, read_json
from whiz.server.state import ServerState
from whiz.server.websocket import Session

log = logging.getLogger("whiz.server")
T = TypeVar("T")


class HostAndOrigin:
    """Every HTTP request: its Host on the allow-list, and its Origin, when a browser sent one, this
    server's own (or allow-listed). Without it any web page could spend this server's compute.
    WebSockets are checked in their route, which answers with an error event and a close code."""

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


def error_response(exc: WhizError) -> JSONResponse:
    headers = {"Retry-After": "1"} if exc.status in (429, 503) else None
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.status, headers=headers)


def error_response_at(path: str, exc: WhizError) -> JSONResponse:
    """The error in the shape the route's clients read: Anthropic's on the Messages routes (its
    SDK shows `error.message` from that shape only), OpenAI's everywhere else."""
    if path == MESSAGES_PATH or path.startswith(MESSAGES_PATH + "/"):
        return anthropic_error(exc)
    return error_response(exc)


def sse(events: AsyncIterator[dict], *, named: bool) -> StreamingResponse:
    """Server-sent events; Responses events are named, chat chunks end with [DONE]."""

    async def body():
        async for ev in events:
            head = f"event: {ev['type']}\n" if named else ""
            yield f"{head}data: {json.dumps(ev)}\n\n"
        if not named:
            yield "data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


SESSION_HEADERS = ("x-session-id", "session_id", "session-id")
"""Headers a client may name its session with; turns of one session stay on one replica."""


def session_header(headers: Mapping[str, str]) -> str | None:
    return next((headers[h] for h in SESSION_HEADERS if headers.get(h)), None)


RouteSource = Callable[[ServerState], Sequence[BaseRoute]]
"""Routes from a layer above (the browser app), built over the server's state: its keys, its
guard, its services. Anything they must stop with the app goes into `state.closers`."""


def create_app(
    engine: Engine | Backend, settings: ServeSettings | None = None, routes: Sequence[RouteSource] = ()
) -> Starlette:
    """The app over an `Engine` (wrapped in `EngineBackend`) or any other `Backend`, with the
    model API's routes and those `routes` builds."""
    settings = settings or ServeSettings()
    backend: Backend = EngineBackend(engine) if hasattr(engine, "generate") else engine  # type: ignore[assignment]
    state = ServerState(backend, settings)

    async def read_body(request: Request, model: type[T]) -> tuple[T, str | None]:
        """Authenticate, rate-limit, decode and validate a POST body."""
        state.check_open()
        key = bearer(request.headers.get("authorization"))
        state.keys.check(key)
        state.check_rate(key, request.client.host if request.client else None)
        raw = await state.read_body(request)
        return await read_json(raw, lambda data: parse(model, data)), key

    async def responses_create(request: Request) -> Response:
        req, key = await read_body(request, ResponsesRequest)
        tenant = state.tenant(key, request.headers)
        previous = None
        if req.previous_response_id is not None:
            found = state.store.get(req.previous_response_id, tenant)
            if found is None:
                raise InvalidRequest(
                    f"Previous response '{req.previous_response_id}' was not found. "
                    "Send the full input instead.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            previous = found[1]
        turn = await state.responses.prepare_async(
            req, previous, session=session_header(request.headers), tenant=tenant
        )
        run = state.responses.start(turn)
        state.metrics.request("responses.http")

        async def events():
            async for ev in run.events():
                yield ev
            if run.conversation is not None and req.store:
                state.store.put(run.response, run.conversation, tenant)
            state.metrics.finished(run.response)

        if req.stream:
            return sse(events(), named=True)

        try:
            await run_to_end(request, events(), run.cancel)
        except ClientGone:
            return Response(status_code=499)  # nginx's "client closed request"; no one reads it
        if run.error is not None:
            raise run.error  # nothing was sent yet, so the client gets the error's own status
        return JSONResponse(run.response)

    async def responses_get(request: Request) -> Response:
        key = bearer(request.headers.get("authorization"))
        state.keys.check(key)
        found = state.store.get(request.path_params["response_id"], state.tenant(key, request.headers))
        if found is None:
            raise NotFound(
                f"No response with id '{request.path_params['response_id']}'.", param="response_id"
            )
        return JSONResponse(found[0])

    async def chat_completions(request: Request) -> Response:
        req, key = await read_body(request, ChatRequest)
        state.metrics.request("chat")
        session = session_header(request.headers)
        tenant = state.tenant(key, request.headers)
        if req.stream:
            # A refusal gets its HTTP status, not a 200 stream.
            turns = await state.chat.open(req, session, tenant)
            return sse(state.chat.stream(req, turns), named=False)
        try:
            out = await until_disconnected(request, state.chat.complete(req, session, tenant))
        except ClientGone:
            return Response(status_code=499)
        state.metrics.finished(out)
        return JSONResponse(out)

    async def models(request: Request) -> Response:
        state.keys.check(bearer(request.headers.get("authorization")))
        entry = {"id": state.model_name, "object": "model", "created": 0, "owned_by": "whiz"}
        if backend.info.n_ctx:
            entry["context_window"] = backend.info.n_ctx
        return JSONResponse({"object": "list", "data": [entry]})

    async def health(request: Request) -> Response:
        """Liveness and load: 503 while draining or when the engine's worker is dead, so a gateway
        or a load balancer takes this server out of rotation."""
        load = backend.status()
        alive = load.get("engine_worker_alive", 1) == 1
        status = "ok" if alive and not state.draining else ("draining" if alive else "engine_dead")
        body = {"status": status, "model": state.model_name, "version": __version__, "load": load}
        return JSONResponse(body, status_code=200 if status == "ok" else 503)

    async def metrics(request: Request) -> Response:
        # Behind keys, counters are the owner's: they tell traffic, errors by code and, behind a
        # gateway, the replicas' addresses. Scrapers send the key as a bearer token.
        state.keys.check(bearer(request.headers.get("authorization")))
        text = state.metrics.render(backend.status())
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    async def responses_socket(ws: WebSocket) -> None:
        offered = ws.scope.get("subprotocols") or []
        await ws.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        key = bearer(ws.headers.get("authorization")) or key_from_subprotocols(offered)
        who = state.client_key(key, ws.client.host if ws.client else None)
        try:
            state.browser.check(ws.headers, ws.url.scheme)
            state.keys.check(key)
            named_tenant(ws.headers)  # a malformed one is refused here, with the other refusals
            state.open_socket(who)
        except WhizError as exc:
            await ws.send_text(json.dumps({"type": "error", "status": exc.status, "error": exc.to_dict()}))
            code = {403: FORBIDDEN_CLOSE_CODE, 503: 1013, 429: 1013}.get(
                exc.status, 1008
            )  # 1013: try again later
            await ws.close(code=code, reason=exc.code)
            return
        session = Session(ws, state, key, session_id=session_header(ws.headers))
        state.metrics.ws_sessions += 1
        state.sessions.add(session)
        try:
            await session.serve()
        finally:
            state.sessions.discard(session)
            state.metrics.ws_sessions -= 1
            state.close_socket(who)

    async def on_whiz_error(request: Request, exc: WhizError) -> Response:
        state.metrics.error(exc.code)
        return error_response_at(request.url.path, exc)

    async def on_http_error(request: Request, exc: HTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        err = WhizError(str(exc.detail), code=code)
        err.status, err.type = exc.status_code, "invalid_request_error"
        return error_response_at(request.url.path, err)

    async def on_crash(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error")
        return error_response_at(request.url.path, WhizError("The server failed to handle this request."))

    api: list[BaseRoute] = [
        Route("/v1/responses", responses_create, methods=["POST"]),
        Route("/v1/responses/{response_id}", responses_get, methods=["GET"]),
        WebSocketRoute("/v1/responses", responses_socket),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    api += messages_routes(state) + codex_routes(state) + completions_routes(state, read_body)
    for source in routes:
        api += source(state)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # A backend holding connections or a health-check task lives as long as the app; a running
        # heal stops first (the exit stack unwinds in reverse).
        async with contextlib.AsyncExitStack() as stack:
            if hasattr(backend, "__aenter__"):
                await stack.enter_async_context(backend)  # type: ignore[arg-type]
            for close in state.closers:
                stack.push_async_callback(close)
            yield

    app = Starlette(
        routes=api,
        exception_handlers={WhizError: on_whiz_error, HTTPException: on_http_error, Exception: on_crash},
        middleware=[Middleware(Draining, state=state), Middleware(HostAndOrigin, guard=state.browser)],
        lifespan=lifespan,
    )
    app.state.whiz = state
    return app
