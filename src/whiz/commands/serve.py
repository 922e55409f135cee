"""Starting the server: load the engine (or reach the upstreams), print where it listens, run uvicorn."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from rich.console import Console
from starlette.applications import Starlette

from whiz.config import ServeSettings
from whiz.engine.factory import load_engine
from whiz.errors import InvalidRequest
from whiz.models.store import default_home
from whiz.seams import Backend, Engine
from whiz.server.app import create_app
from whiz.server.background import BackgroundServers
from whiz.server.browser import is_loopback
from whiz.server.idle import IdleWatch
from whiz.server.listen import DrainingServer, uvicorn_config

if TYPE_CHECKING:
    from whiz.gateway import Upstream


def build_app(backend: Engine | Backend, settings: ServeSettings) -> Starlette:
    """The app `whiz serve` runs: the model API, and the browser app unless `--engine-only` (a
    replica behind a gateway serves the model API only, and loads no module of the agent)."""
    if settings.engine_only:
        return create_app(backend, settings)
    from whiz.web.app import browser_app  # the workspace's edits and heals: the agent's modules

    return create_app(backend, settings, routes=[browser_app])


def check_bind(settings: ServeSettings) -> None:
    """Refuse to serve a non-loopback address without a key, unless told to on purpose."""
    if is_loopback(settings.host) or settings.api_keys or settings.gateway_keys or settings.insecure_no_auth:
        return
    raise InvalidRequest(
        f"--host {settings.host} makes the server reachable from other machines, and without --api-key "
        "anyone who reaches it may use it. Add --api-key KEY (or WHIZ_API_KEYS), or pass "
        "--insecure-no-auth if this network is trusted.",
        param="host",
    )


def serve_forever(settings: ServeSettings, console: Console) -> None:
    check_bind(settings)  # before the model takes time to load
    if not settings.engine_only:
        from whiz.web.workspace import check_settings

        check_settings(settings)  # a bad --workspace is reported before the model takes time to load
    if settings.upstreams:
        if settings.engine_only:
            raise InvalidRequest("--engine-only runs a local model; it does not go with --upstream.")
        serve_gateway(settings, console)
        return
    t0 = time.perf_counter()
    with console.status(f"loading {settings.model} ..."):
        engine = load_engine(
            settings, progress=lambda note: console.print(f"[yellow]note[/yellow] {note}", soft_wrap=True)
        )
    info = engine.info
    console.print(
        f"[green]whiz[/green] {info.model}: {info.n_ctx} tokens per conversation, "
        f"{info.n_seq_max} warm sessions, loaded in {time.perf_counter() - t0:.1f} s",
        soft_wrap=True,
    )
    if getattr(engine, "draft_model", None) is not None:
        console.print(f"drafting with {engine.draft_model.name} (drafts are verified; output is unchanged)")
    base = f"http://{settings.host}:{settings.port}"
    if settings.engine_only:
        console.print(
            f"engine-only replica: the model API and nothing else; "
            f"put it behind a gateway with `whiz serve --upstream {base}`",
            soft_wrap=True,
        )
    _print_urls(settings, console)
    app = build_app(engine, settings)
    try:
        run_uvicorn(app, settings, console)
    finally:
        engine.close()


def serve_gateway(settings: ServeSettings, console: Console) -> None:
    """Serve whiz's API on top of OpenAI-compatible upstreams (one, or several as a gateway)."""
    from whiz.gateway import build_gateway

    gateway = build_gateway(settings)

    async def first_look() -> None:
        try:
            await gateway.discover()
        finally:  # the server's own event loop opens its own connections
            for replica in gateway.router.replicas:
                await replica.upstream.aclose()

    with console.status("asking the upstreams what they serve ..."):
        asyncio.run(first_look())
    for r in gateway.router.replicas:
        u = r.upstream
        if r.healthy:
            extras = [
                name
                for name, on in (("prediction", u.sends_prediction), ("prompt_cache_key", u.sends_cache_key))
                if on
            ]
            what = f"{u.flavour}, model {u.model}" + (f", forwards {' and '.join(extras)}" if extras else "")
            console.print(f"[green]upstream[/green] {r.name}: {what}", soft_wrap=True)
            if (settings.api_keys or settings.gateway_keys) and not gateway.single_tenant:
                _print_tenants(u, console)
        else:
            console.print(f"[yellow]upstream[/yellow] {r.name}: out of rotation ({r.reason})", soft_wrap=True)
    if len(gateway.router.replicas) > 1:
        console.print(
            f"gateway: {settings.routing} routing over {len(gateway.router.replicas)} replicas",
            soft_wrap=True,
        )
    _print_urls(settings, console)
    app = build_app(gateway, settings)
    run_uvicorn(app, settings, console)


def _print_tenants(upstream: Upstream, console: Console) -> None:
    """Whether `upstream` keeps this gateway's keys apart; where it cannot, say what that costs."""
    if upstream.keeps_tenants:
        console.print(f"  keys kept apart there, {upstream.tenant_isolation}", soft_wrap=True)
        return
    console.print(
        f"  [yellow]keys share one cache there[/yellow]: {upstream.tenant_isolation}. So "
        "cached_tokens are reported as 0 to every key, but response times still tell one key what "
        "another's prompts began with: give each key its own upstream where that matters.",
        soft_wrap=True,
    )


def _print_urls(settings: ServeSettings, console: Console) -> None:
    base = f"http://{settings.host}:{settings.port}"
    console.print(
        f"serving on [bold]{base}/v1[/bold]  (WebSocket: ws://{settings.host}:{settings.port}/v1/responses)",
        soft_wrap=True,
    )
    where = f", workspace {settings.workspace}" if settings.workspace else ""
    console.print(f"web app: [bold]{base}/[/bold]{where}", soft_wrap=True)
    # Never the key itself: banners end up in logs, screenshots and shared terminals.
    key = ' -H "Authorization: Bearer $WHIZ_KEY"' if settings.api_keys else ""
    console.print(
        f"try: curl {base}/v1/chat/completions{key} -H 'Content-Type: application/json' "
        '-d \'{"messages":[{"role":"user","content":"Write hello world in Python"}]}\'',
        soft_wrap=True,  # a wrapped command can't be pasted
    )


def run_uvicorn(app: Starlette, settings: ServeSettings, console: Console) -> None:
    """Serve `app` until SIGTERM/SIGINT (then drain within `shutdown_grace_s` and return) or, with
    `--idle-exit`, until no request came for that long."""
    watch = IdleWatch(app) if settings.idle_exit_s else None
    config = uvicorn_config(watch or app, settings, app.state.whiz)
    server = DrainingServer(config, app.state.whiz)
    if watch is None:
        server.run()
        return

    async def until_idle() -> None:
        while not server.should_exit:
            await asyncio.sleep(min(5.0, settings.idle_exit_s / 4))
            if watch.idle_s() >= settings.idle_exit_s:
                console.print(f"idle for {settings.idle_exit_s:g} s: exiting", soft_wrap=True)
                server.stop()

    async def main() -> None:
        watcher = asyncio.ensure_future(until_idle())
        try:
            await server.serve()
        finally:
            watcher.cancel()

    asyncio.run(main())


def background_status() -> int:
    """`whiz serve status`: the background servers, one line each; 0 when one runs, 1 when none."""
    running = BackgroundServers(default_home()).all()
    if not running:
        print("no background server is running")
        return 1
    for r in running:
        age = time.time() - r.started_at
        idle = f"exits after {r.idle_exit_s / 60:g} idle min"
        print(f"{r.model}  {r.url}  pid {r.pid}  up {age / 60:.0f} min  {idle}")
        print(f"  log: {r.log}")
    return 0


def stop_background() -> int:
    """`whiz serve stop`: end every background server; 0, or 1 when none was running."""
    stopped = BackgroundServers(default_home()).stop()
    for r in stopped:
        print(f"stopped {r.model} at {r.url} (pid {r.pid})")
    if not stopped:
        print("no background server is running")
    return 0 if stopped else 1
