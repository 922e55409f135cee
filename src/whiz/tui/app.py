"""`whiz code`: the interactive coding agent in a terminal.

The screen has two parts. Above, the transcript, printed into the terminal's own scrollback (so
it can be scrolled, searched and copied like any output). Below, a small live area that
prompt_toolkit redraws: the line the model is writing, an approval question when there is one,
a status line (what the agent does, TTFT, tokens/s; the model and the mode when idle), and the
input line, which stays usable while the agent works: Enter then steers it instead of starting a
new task.

Turns go through an `AgentSession`: the safety policy looks at each request first, and the router
picks the fast or the deep model (`/mode`); every switch and every flagged request is a notice in
the transcript (`notices.py`) and an entry in the session log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import WordCompleter
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, VSplit, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.layout.dimension import Dimension
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style
from rich.text import Text

from whiz.agent.loop import Agent
from whiz.agent.models.chat_model import ChatModel
from whiz.agent.models.seam import ModelClient
from whiz.agent.models.whiz_model import WhizModel
from whiz.agent.store.sessions import SessionInfo
from whiz.client import ClientError, HttpClient
from whiz.client.urls import api_base
from whiz.modes.pool import Label
from whiz.modes.session import AgentSession
from whiz.tui import sessions
from whiz.tui.approver import PromptApprover
from whiz.tui.commands import COMMANDS, SlashCommands
from whiz.tui.scrollback import Scrollback
from whiz.tui.view import TranscriptView

QUIT_WINDOW_S = 2.0
"""A second Ctrl-C within this time of the first leaves whiz."""
LIVE_LINES = 6
STOP_WAIT_S = 10.0

STYLE = Style.from_dict(
    {
        "live": "",
        "status": "bg:#262626 #bcbcbc",
        "status.busy": "bg:#262626 #5fd7ff bold",
        "status.hint": "bg:#262626 #808080",
        "approval": "bg:#5f0000 #ffffff bold",
        "prompt": "#5fd7ff bold",
        "prompt.steer": "#d787ff bold",
    }
)


class CodeApp:
    """The running UI over one agent session. `await run()` returns when the user leaves."""

    def __init__(
        self,
        session: AgentSession,
        scrollback: Scrollback,
        view: TranscriptView,
        approver: PromptApprover,
        *,
        history: History | None = None,
    ):
        self.session = session
        """The agent session: its conversation, store and undo history (what `/clear` and `/resume`
        switch), and its mode and models (what `/mode` switches)."""
        self.scrollback = scrollback
        self.view = view
        self.approver = approver
        self.model_names: dict[Label, str] = {}
        """What the status line calls each model, once its client is open."""
        self.commands = SlashCommands(self)
        self.turn: asyncio.Task | None = None
        self._last_interrupt = 0.0
        self._tasks: set[asyncio.Task] = set()
        view.on_change = self.invalidate
        approver.on_change = self.invalidate
        self.input = Buffer(
            multiline=False,
            history=history or InMemoryHistory(),
            completer=WordCompleter([f"/{c.name}" for c in COMMANDS], sentence=True),
            complete_while_typing=False,
            accept_handler=self._accept,
        )
        self.app: Application = Application(
            layout=Layout(self._layout(), focused_element=self.input),
            key_bindings=self._keys(),
            style=STYLE,
            full_screen=False,
            mouse_support=False,
            refresh_interval=0.25,  # the status line's clock
        )
        # Esc must stop the agent at once, not after the wait that tells a lone Esc from the
        # start of an escape sequence (half a second by default).
        self.app.ttimeoutlen = 0.05

    # -- state ---------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.turn is not None and not self.turn.done()

    @property
    def model_name(self) -> str:
        """The name of the model that answers now."""
        current = self.session.router.current
        return self.model_names.get(current, current)

    def mode_text(self) -> str:
        """`auto`, or `auto, deep now` while another model than the mode's own answers."""
        router = self.session.router
        mode = router.mode
        return mode if router.current == mode.first else f"{mode}, {router.current} now"

    async def name_models(self) -> None:
        """Learn the names of the models opened since (for the status line)."""
        key = {"fast": self.session.options.fast.api_key, "deep": self.session.options.deep.api_key}
        for label, client in self.session.routed.opened().items():
            if label not in self.model_names:
                self.model_names[label] = await model_label(client, key[label])
        self.invalidate()

    def invalidate(self) -> None:
        if self.app.is_running:
            self.app.invalidate()

    # -- layout ----------------------------------------------------------------------------------------

    def _layout(self) -> HSplit:
        live = Window(
            FormattedTextControl(self._live_text),
            wrap_lines=True,
            height=Dimension(max=LIVE_LINES),
            dont_extend_height=True,
            style="class:live",
        )
        approval = Window(FormattedTextControl(self._approval_text), wrap_lines=True, dont_extend_height=True)
        status = Window(FormattedTextControl(self._status_text), height=1, style="class:status")
        prompt = VSplit(
            [
                Window(FormattedTextControl(self._prompt_text), dont_extend_width=True),
                Window(BufferControl(self.input), wrap_lines=True, dont_extend_height=True),
            ]
        )
        return HSplit(
            [
                ConditionalContainer(live, filter=Condition(lambda: bool(self.view.partial))),
                ConditionalContainer(approval, filter=Condition(lambda: self.approver.pending is not None)),
                status,
                prompt,
            ]
        )

    def _live_text(self) -> StyleAndTextTuples:
        width = max(20, self.app.output.get_size().columns)
        return [("class:live", self.view.partial[-LIVE_LINES * width :])]

    def _approval_text(self) -> StyleAndTextTuples:
        request = self.approver.pending
        if request is None:
            return []
        return [
            ("class:approval", f" Allow the agent to {request.summary}? "),
            ("", "  y: yes   n: no   Esc: stop the turn"),
        ]

    def _status_text(self) -> StyleAndTextTuples:
        if self.running:
            doing = "waiting for your answer" if self.approver.pending else self.view.status()
            return [
                ("class:status.busy", " ● " + (doing or "working")),
                ("class:status.hint", f"  ·  {self.session.router.current} · Esc stops · Enter steers "),
            ]
        agent = self.session.agent
        parts = [self.model_name, self.mode_text(), agent.approvals.mode.value, self.session.id]
        if (used := context_percent(agent)) is not None:
            parts.append(f"ctx {used}%")
        return [("class:status", " " + " · ".join(parts)), ("class:status.hint", "  ·  /help ")]

    def _prompt_text(self) -> StyleAndTextTuples:
        return [("class:prompt.steer", "steer › ")] if self.running else [("class:prompt", "› ")]

    # -- keys ------------------------------------------------------------------------------------------

    def _keys(self) -> KeyBindings:
        keys = KeyBindings()
        running = Condition(lambda: self.running)
        asking = Condition(lambda: self.approver.pending is not None and not self.input.text)
        empty = Condition(lambda: not self.input.text)

        @keys.add("escape", filter=running, eager=True)
        @keys.add("c-c", filter=running)
        def _stop(event: KeyPressEvent) -> None:
            self.stop()

        @keys.add("c-c", filter=~running)
        def _interrupt(event: KeyPressEvent) -> None:
            if self.input.text:
                self.input.reset()
                return
            now = time.monotonic()
            if now - self._last_interrupt < QUIT_WINDOW_S:
                self.quit()
            else:
                self._last_interrupt = now
                self.scrollback.print(Text("press Ctrl-C again (or Ctrl-D) to leave", style="dim"))

        @keys.add("c-d", filter=empty)
        def _leave(event: KeyPressEvent) -> None:
            self.quit()

        @keys.add("y", filter=asking)
        def _yes(event: KeyPressEvent) -> None:
            self.approver.answer(True)

        @keys.add("n", filter=asking)
        def _no(event: KeyPressEvent) -> None:
            self.approver.answer(False)

        return keys

    # -- actions ---------------------------------------------------------------------------------------

    def _accept(self, buffer: Buffer) -> bool:
        text = buffer.text.strip()
        if not text:
            return False
        if text.startswith("/"):
            self._spawn(self.commands.run(text))
        elif self.running:
            self.session.agent.steer(text)
            self.scrollback.print(
                Text.assemble(
                    ("› ", "bold magenta"),
                    (text, "magenta"),
                    ("  (the agent reads it at its next step)", "dim"),
                )
            )
        else:
            self.scrollback.print(Text.assemble(("› ", "bold cyan"), (text, "bold")))
            self.turn = asyncio.ensure_future(self._run_turn(text))
        return False  # clear the input line

    async def _run_turn(self, task: str) -> None:
        try:
            result = await self.session.run(task)
        except Exception as exc:  # a failure here must not take the UI (and the session) down
            self.scrollback.print(Text(f"✗ {type(exc).__name__}: {exc}", style="bold red"))
        else:
            self.view.turn_ended(result)
            await self.name_models()  # the deep model, if the turn escalated to it
        finally:
            self.invalidate()

    def _spawn(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stop(self) -> None:
        """Stop the running turn now (the model call, a command, or an approval question)."""
        self.session.cancel()

    def quit(self) -> None:
        if self.app.is_running:
            self.app.exit()

    def clear_screen(self) -> None:
        self.app.renderer.clear()

    def show_conversation(self, info: SessionInfo) -> None:
        """After switching sessions: what was asked and answered so far."""
        turns = sessions.turns(self.session, info)
        self.scrollback.print(Text(f"resumed {info.id}: {len(turns)} turn(s)", style="bold"))
        for turn in turns[-5:]:
            self.scrollback.print(Text.assemble(("› ", "bold cyan"), (turn.task.splitlines()[0], "bold")))
            outcome = {"completed": turn.message[:200], "cancelled": "(stopped)"}.get(
                turn.status, f"failed: {turn.message[:200]}"
            )
            edited = f" (edited {', '.join(turn.changed)})" if turn.changed else ""
            self.scrollback.print(Text(f"  {outcome}{edited}", style="dim"))

    # -- the whole run ---------------------------------------------------------------------------------

    async def run(self) -> None:
        await self.name_models()
        self.scrollback.print(
            Text.assemble(
                ("whiz code", "bold cyan"),
                f" · {self.model_name} · {self.session.router.mode} mode · {self.session.agent.ws.root}\n",
                ("type a task and press Enter · /help lists commands · Esc stops · Ctrl-D leaves", "dim"),
            )
        )
        if self.session.options.resume is not None:
            self.show_conversation(self.session.info)
        try:
            with patch_stdout(raw=True):
                await self.app.run_async()
        finally:
            if self.running:
                self.stop()
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(self.turn), STOP_WAIT_S)
            for task in list(self._tasks):
                task.cancel()
            self.scrollback.flush_now()


def context_percent(agent: Agent) -> int | None:
    """How full the context window is, in percent (None when its size is not known)."""
    window = agent.context_window
    if not window:
        return None
    return round(100 * agent.context_used() / window)


async def model_label(model: ModelClient, api_key: str | None) -> str:
    """A model's name for the status line: the one requested, else the server's first."""
    if isinstance(model, ChatModel):
        return model.model or "the upstream's model"
    if not isinstance(model, WhizModel):
        return type(model).__name__
    if model.model:
        return model.model
    try:
        async with HttpClient(api_base(model.socket.url), api_key, timeout_s=5) as http:
            served = await http.models()
    except ClientError:
        return "?"
    return served[0] if served else "?"
