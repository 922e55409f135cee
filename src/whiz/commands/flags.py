"""What the `whiz` commands share: the one way a command refuses bad input. Their flags are
settings, declared once (`agent_options`, `whiz.bench.options`, `whiz.commands.setup`)."""

from __future__ import annotations

import typer
from rich.console import Console

err = Console(stderr=True)


def fail(message: str) -> typer.Exit:
    """`raise fail(...)`: one red line on stderr, exit 2 (the command could not start)."""
    from rich.markup import escape

    err.print(f"[red]error:[/red] {escape(message)}")  # "[serve]" in a message is text, not markup
    return typer.Exit(2)
