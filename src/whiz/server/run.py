"""Starting the server: load the engine, print where it listens, run uvicorn until stopped."""

from __future__ import annotations

import time

import uvicorn
from rich.console import Console

from whiz.config import ServeSettings
from whiz.engine.factory import load_engine
from whiz.server.app import create_app
from whiz.server.workspace_api import check_settings


def serve_forever(settings: ServeSettings, console: Console) -> None:
    check_settings(settings)  # a bad --workspace is reported before the model takes time to load
    t0 = time.perf_counter()
    with console.status(f"loading {settings.model} ..."):
        engine = load_engine(settings)
    info = engine.info
    console.print(
        f"[green]whiz[/green] {info.model}: {info.n_ctx} tokens per conversation, "
        f"{info.n_seq_max} warm sessions, loaded in {time.perf_counter() - t0:.1f} s",
        soft_wrap=True,
    )
    if getattr(engine, "draft_model", None) is not None:
        console.print(f"drafting with {engine.draft_model.name} (drafts are verified; output is unchanged)")
    base = f"http://{settings.host}:{settings.port}"
    console.print(
        f"serving on [bold]{base}/v1[/bold]  (WebSocket: ws://{settings.host}:{settings.port}/v1/responses)",
        soft_wrap=True,
    )
    where = f", workspace {settings.workspace}" if settings.workspace else ""
    console.print(f"web app: [bold]{base}/[/bold]{where}", soft_wrap=True)
    key = f" -H 'Authorization: Bearer {settings.api_keys[0]}'" if settings.api_keys else ""
    console.print(
        f"try: curl {base}/v1/chat/completions{key} -H 'Content-Type: application/json' "
        '-d \'{"messages":[{"role":"user","content":"Write hello world in Python"}]}\'',
        soft_wrap=True,  # a wrapped command can't be pasted
    )
    app = create_app(engine, settings)
    try:
        uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", ws="websockets-sansio")
    finally:
        engine.close()
