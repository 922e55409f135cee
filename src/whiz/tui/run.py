"""Starting `whiz code`: check for a terminal, open the agent session with its modes (connecting to
a server or starting one), run the UI, and close everything however it ends."""

from __future__ import annotations

import asyncio
import dataclasses
import sys

from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from rich.console import Console
from rich.text import Text

from whiz.agent.mode_session import ModeSession, RunOptions
from whiz.agent.modes import FastSettings, Models
from whiz.agent.runner import AgentOptions, SetupError
from whiz.agent.sessions import data_home
from whiz.tui.app import CodeApp
from whiz.tui.approver import PromptApprover
from whiz.tui.scrollback import Scrollback
from whiz.tui.view import TranscriptView

EXIT_OK, EXIT_SETUP, EXIT_INTERRUPTED = 0, 2, 130


def run_code(options: AgentOptions, run: RunOptions | None = None, *, pool: Models | None = None) -> int:
    """Run the interactive UI until the user leaves; returns the exit code.

    `run` holds the mode, the deep model, the healing setting and the policy (by default: fast
    mode, or the resumed session's; the fast model as `options` says; refuse flagged requests).
    With a test command the agent heals as `run.heal` and the mode say (best of N where the
    tests decide). `pool` injects the models (tests and demos use a
    `ScriptedPool`); by default the fast model is the server in `options` (or one started in this
    process) and the deep one starts on first use.
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        sys.stderr.write('error: whiz code needs a terminal; for scripts and pipes use `whiz exec "task"`\n')
        return EXIT_SETUP
    run = run or RunOptions(
        options.workspace,
        fast=FastSettings(options.base_url, options.api_key, options.model),
        home=options.home,
    )
    probe = Console()
    scrollback = Scrollback(sys.stdout, color_system=probe.color_system, no_color=probe.no_color)
    try:
        return asyncio.run(_main(options, run, scrollback, pool))
    except KeyboardInterrupt:  # before the UI took over the keys (while a server starts, say)
        return EXIT_INTERRUPTED


async def _main(options: AgentOptions, run: RunOptions, scrollback: Scrollback, pool: Models | None) -> int:
    view = TranscriptView(scrollback)
    approver = PromptApprover()
    options = dataclasses.replace(options, approver=approver)

    def notice(line: str) -> None:
        scrollback.print(Text(line, style="dim"))

    try:
        session = await ModeSession.open(options, run, sink=view, notice=notice, pool=pool)
    except SetupError as exc:
        scrollback.print(Text(f"error: {exc.message}", style="bold red"))
        return EXIT_SETUP
    try:
        app = CodeApp(session, options, scrollback, view, approver, history=input_history(options))
        await app.run()
    finally:
        await session.close()
    return EXIT_OK


def input_history(options: AgentOptions) -> History:
    """What was typed before (Up recalls it), kept across runs in the data home."""
    home = options.home or data_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        return FileHistory(str(home / "code_history"))
    except OSError:  # a read-only home: history for this run only
        return InMemoryHistory()
