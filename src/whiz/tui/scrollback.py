"""Printing above the input line: rich renders to ANSI text, prompt_toolkit makes room for it.

While the application runs, output must go through `run_in_terminal` (which hides the live part
of the UI, prints, and draws it again below), or it would be drawn over. Writes that arrive in the
same moment are printed together, so a fast stream does not redraw the UI for every line.
"""

from __future__ import annotations

import asyncio
import io
import shutil
from typing import TextIO

from prompt_toolkit.application import get_app_or_none, run_in_terminal
from rich.console import Console, RenderableType

COALESCE_S = 0.03


class Scrollback:
    """Rich renderables printed, in order, above the running application (or plainly, without one)."""

    def __init__(self, stream: TextIO, *, color_system: str | None, no_color: bool = False):
        self.stream = stream
        self.color_system = color_system
        self.no_color = no_color
        self._pending: list[str] = []
        self._scheduled = False

    def width(self) -> int:
        return max(20, shutil.get_terminal_size((100, 30)).columns)

    def render(self, *renderables: RenderableType, style: str | None = None) -> str:
        """The ANSI text of `renderables` at the terminal's width."""
        buffer = io.StringIO()
        console = Console(
            file=buffer,
            force_terminal=self.color_system is not None,
            color_system=self.color_system,  # type: ignore[arg-type]
            no_color=self.no_color,
            width=self.width(),
            highlight=False,
            emoji=False,
        )
        console.print(*renderables, style=style, soft_wrap=False)
        return buffer.getvalue()

    def print(self, *renderables: RenderableType, style: str | None = None) -> None:
        """Queue `renderables` for printing; they appear within a few tens of milliseconds."""
        self.write(self.render(*renderables, style=style))

    def write(self, text: str) -> None:
        """Queue ready ANSI text (complete lines)."""
        if not text:
            return
        self._pending.append(text)
        app = get_app_or_none()
        if app is None or not app.is_running:
            self.flush_now()
        elif not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_later(COALESCE_S, self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        text, self._pending = "".join(self._pending), []
        if not text:
            return
        app = get_app_or_none()
        if app is None or not app.is_running:
            self._emit(text)
        else:
            run_in_terminal(lambda: self._emit(text))

    def flush_now(self) -> None:
        """Print whatever is queued, at once (no application running)."""
        text, self._pending = "".join(self._pending), []
        self._emit(text)

    def _emit(self, text: str) -> None:
        if text:
            self.stream.write(text)
            self.stream.flush()
