"""Starting `whiz code`: check for a terminal, open the agent session (connecting to a server or
starting one), run the UI, and close everything however it ends."""

from __future__ import annotations

import asyncio
import dataclasses
import sys

from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from rich.console import Console
from rich.text import Text

from whiz.agent.model import ModelClient
from whiz.agent.runner import AgentOptions, AgentSession, SetupError
from whiz.agent.sessions import data_home
from whiz.agent.whiz_model import WhizModel
from whiz.client import ClientError, HttpClient
from whiz.client.urls import api_base
from whiz.tui.app import CodeApp
from whiz.tui.approver import PromptApprover
from whiz.tui.scrollback import Scrollback
from whiz.tui.view import TranscriptView

EXIT_OK, EXIT_SETUP, EXIT_INTERRUPTED = 0, 2, 130


def run_code(options: AgentOptions, *, model: ModelClient | None = None) -> int:
    """Run the interactive UI until the user leaves; returns the exit code.

    `model` injects a model client (tests and demos use a `ScriptedModel`); by default the agent
    connects to the server in `options` (or starts one in this process).
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        sys.stderr.write('error: whiz code needs a terminal; for scripts and pipes use `whiz exec "task"`\n')
        return EXIT_SETUP
    probe = Console()
    scrollback = Scrollback(sys.stdout, color_system=probe.color_system, no_color=probe.no_color)
    try:
        return asyncio.run(_main(options, scrollback, model))
    except KeyboardInterrupt:  # before the UI took over the keys (while a server starts, say)
        return EXIT_INTERRUPTED


async def _main(options: AgentOptions, scrollback: Scrollback, model: ModelClient | None) -> int:
    view = TranscriptView(scrollback)
    approver = PromptApprover()
    options = dataclasses.replace(options, approver=approver)

    def notice(line: str) -> None:
        scrollback.print(Text(line, style="dim"))

    try:
        session = await AgentSession.open(options, sink=view, notice=notice, model=model)
    except SetupError as exc:
        scrollback.print(Text(f"error: {exc.message}", style="bold red"))
        return EXIT_SETUP
    try:
        label = await model_label(session.agent.model, options)
        app = CodeApp(
            session, options, scrollback, view, approver, model_name=label, history=input_history(options)
        )
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


async def model_label(model: ModelClient, options: AgentOptions) -> str:
    """The model's name for the status line: the one requested, else the server's first."""
    if not isinstance(model, WhizModel):
        return type(model).__name__
    if model.model:
        return model.model
    try:
        async with HttpClient(api_base(model.socket.url), options.api_key, timeout_s=5) as http:
            served = await http.models()
    except ClientError:
        return "?"
    return served[0] if served else "?"
