"""`/health` and `/metrics`: what load balancers, gateways and scrapers ask a server."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from whiz import __version__
from whiz.server.state import ServerState


def probe_routes(state: ServerState) -> list[BaseRoute]:
    """`GET /health` (public: see `guards.PUBLIC_PATHS`) and `GET /metrics` (keyed)."""
    backend = state.backend

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
        text = state.metrics.render(backend.status())
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    return [Route("/health", health, methods=["GET"]), Route("/metrics", metrics, methods=["GET"])]
