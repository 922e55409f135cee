"""What the `whiz` commands share: the one way a command refuses bad input, and the flags the
bench commands and `whiz setup` declare alike (the agent commands' flags are settings:
`agent_options`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

err = Console(stderr=True)


def fail(message: str) -> typer.Exit:
    """`raise fail(...)`: one red line on stderr, exit 2 (the command could not start)."""
    from rich.markup import escape

    err.print(f"[red]error:[/red] {escape(message)}")  # "[serve]" in a message is text, not markup
    return typer.Exit(2)


ApiKeyOpt = Annotated[
    str | None, typer.Option("--api-key", envvar="WHIZ_API_KEY", help="Bearer key for the server.")
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="Model to request (or to load, when whiz starts its own server)."),
]
DeepUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--deep-base-url",
        envvar="WHIZ_DEEP_BASE_URL",
        help="The deep model on any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, a "
        "hosted API), spoken to over Chat Completions. Default: the 1.5B in this process.",
    ),
]
DeepModelOpt = Annotated[
    str | None, typer.Option("--deep-model", help="Model id to ask the deep server for.")
]
DeepKeyOpt = Annotated[
    str | None,
    typer.Option("--deep-api-key", envvar="WHIZ_DEEP_API_KEY", help="Bearer key for the deep server."),
]
