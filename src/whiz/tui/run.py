"""Starting `whiz code`: check for a terminal, open the agent session with its modes (connecting to
a server or starting one), run the UI, and close everything however it ends."""

from __future__ import annotations

import asyncio
import sys

from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from rich.console import Console
from rich.text import Text

from whiz.agent.store.sessions import data_home
from whiz.modes.endpoints import SetupError
from whiz.modes.pool import Models
from whiz.modes.session import AgentSession, SessionOptions
from whiz.tui.app import CodeApp
from whiz.tui.approver import PromptApprover
from whiz.tui.scrollback import Scrollback
from whiz.tui.view import TranscriptView

EXIT_OK, EXIT_SETUP, EXIT_INTERRUPTED = 0, 2, 130


def run_code(options: SessionOptions, *, pool: Models | None = None) -> int:
    """Run the interactive UI until the user leaves; returns the exit code.

    `options` holds the agent's settings, the models, the mode (by default fast, or the resumed
    session's), the healing setting and the policy. With a test command the agent heals as
    `options.heal` and the mode say (best of N where the tests decide). `pool` injects the models
    (tests and demos use a `ScriptedPool`); by default the fast model is the server in
    `options.fast` (or one started in this process) and the deep one starts on first use.
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        sys.stderr.write('error: whiz code needs a terminal; for scripts and pipes use `whiz exec "task"`\n')
        return EXIT_SETUP
    probe = Console()
    scrollback = Scrollback(sys.stdout, color_system=probe.color_system, no_color=probe.no_color)
    try:
        return asyncio.run(_main(options, scrollback, pool))
    except KeyboardInterrupt:  # before the UI took over the keys (while a server starts, say)
        return EXIT_INTERRUPTED


async def _main(options: SessionOptions, scrollback: Scrollback, pool: Models | None) -> int:
    view = TranscriptView(scrollback)
    approver = PromptApprover()

    def notice(line: str) -> None:
        scrollback.print(Text(line, style="dim"))

    try:
        session = await AgentSession.open(options, sink=view, notice=notice, pool=pool, approver=approver)
    except SetupError as exc:
        scrollback.print(Text(f"error: {exc.message}", style="bold red"))
        return EXIT_SETUP
    try:
        app = CodeApp(session, scrollback, view, approver, history=input_history(options))
        await app.run()
    finally:
        await session.close()
    return EXIT_OK


def input_history(options: SessionOptions) -> History:
    """What was typed before (Up recalls it), kept across runs in the data home."""
    home = options.home or data_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        return FileHistory(str(home / "code_history"))
    except OSError:  # a read-only home: history for this run only
        return InMemoryHistory()
