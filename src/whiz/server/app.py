"""`create_app(backend, settings, routes=())`: the Starlette app with every route of docs/protocol.md.

The app runs turns on a `Backend`: an in-process engine (wrapped in `EngineBackend`) or, for
`whiz serve --upstream`, the gateway over OpenAI-compatible servers. It is the model API and
nothing else: the browser app's routes come from above (`whiz.web.app.browser_app`), handed in by the
command that serves them, so this package imports nothing from the agent, the UI or the web app.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from whiz.backend.engine import EngineBackend
from whiz.config import ServeSettings
from whiz.errors import WhizError
from whiz.seams import Backend, Engine
from whiz.server.codex import codex_routes
from whiz.server.completions import completions_routes
from whiz.server.guards import (
    Draining,
    HostAndOrigin,
    error_response_at,
    require_keys,
)
from whiz.server.messages import messages_routes
from whiz.server.openai_api import openai_routes
from whiz.server.probes import probe_routes
from whiz.server.state import ServerState

log = logging.getLogger("whiz.server")


RouteSource = Callable[[ServerState], Sequence[BaseRoute]]
"""Routes from a layer above (the browser app), built over the server's state: its keys, its
guard, its services. Anything they must stop with the app goes into `state.closers`."""


def create_app(
    engine: Engine | Backend, settings: ServeSettings | None = None, routes: Sequence[RouteSource] = ()
) -> Starlette:
    """The app over an `Engine` (wrapped in `EngineBackend`) or any other `Backend`, with the
    model API's routes and those `routes` builds.

    Every module of routes has one shape, a function of the server's state that returns its
    routes; and every route, whatever its module, is put behind the key check here, but those on
    `guards.PUBLIC_PATHS`."""
    settings = settings or ServeSettings()
    backend: Backend = EngineBackend(engine) if hasattr(engine, "generate") else engine  # type: ignore[assignment]
    state = ServerState(backend, settings)

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

    api: list[BaseRoute] = [*openai_routes(state), *probe_routes(state)]
    api += messages_routes(state) + codex_routes(state) + completions_routes(state)
    for source in routes:
        api += source(state)
    require_keys(api, state)  # every route but guards.PUBLIC_PATHS: none can forget the key

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
