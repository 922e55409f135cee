"""The slash commands: `/help` lists them. Each is a method taking the text after its name.

Commands that change the conversation or the files (`/undo`, `/clear`, `/resume`) wait for the
turn to end; the others also work while the agent runs.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rich.table import Table
from rich.text import Text

from whiz.agent.approvals import ApprovalMode
from whiz.agent.context.agents_md import AgentsFileExists, write_agents_md
from whiz.agent.context.instructions import read_instructions
from whiz.agent.errors import WhizAgentError
from whiz.agent.loop import Agent
from whiz.agent.models.whiz_model import WhizModel
from whiz.client import ClientError, HttpClient
from whiz.client.urls import api_base
from whiz.errors import WhizError
from whiz.modes.endpoints import DeepSettings, SetupError
from whiz.modes.registry import Mode
from whiz.tui import sessions
from whiz.tui.diffs import render_diff

if TYPE_CHECKING:
    from whiz.agent.store.sessions import SessionInfo
    from whiz.modes.pool import Label
    from whiz.modes.session import AgentSession
    from whiz.tui.scrollback import Scrollback


class Screen(Protocol):
    """The running UI as the slash commands see it (`app.CodeApp`): its session, where it prints,
    and what a command may ask of it."""

    session: AgentSession
    scrollback: Scrollback
    model_names: dict[Label, str]
    """The model each side's server reports, by side (a /model choice replaces one)."""

    @property
    def running(self) -> bool: ...

    @property
    def model_name(self) -> str: ...

    def invalidate(self) -> None: ...

    async def name_models(self) -> None: ...

    def clear_screen(self) -> None: ...

    def show_conversation(self, info: SessionInfo) -> None: ...

    def quit(self) -> None: ...


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    help: str
    while_running: bool = True


COMMANDS = [
    Command("help", "/help", "show this list"),
    Command("undo", "/undo", "restore the files the latest turn changed, exactly", while_running=False),
    Command("diff", "/diff", "what the agent changed in this session (what /undo can still take back)"),
    Command("model", "/model [NAME]", "list the server's models, or switch to NAME"),
    Command("mode", "/mode [fast|deep|auto]", "show the mode and which model answers, or switch"),
    Command("approval", "/approval [MODE]", "show or set: read-only, auto-edit (default), full-auto"),
    Command(
        "compact",
        "/compact",
        "shorten the conversation now: long outputs cut, earlier turns summarised",
        while_running=False,
    ),
    Command(
        "init",
        "/init [--force]",
        "write a starting AGENTS.md from the repository map (--force replaces one)",
        while_running=False,
    ),
    Command("clear", "/clear", "start a new conversation (this one stays stored)", while_running=False),
    Command("resume", "/resume [ID]", "list this folder's sessions, or continue one", while_running=False),
    Command("exit", "/exit", "leave whiz (also Ctrl-D)"),
]

KEYS = [
    ("Enter", "send a task; while the agent works, a message that steers it at its next step"),
    ("Esc, Ctrl-C", "stop the agent at once (the server stops generating too)"),
    ("y / n", "answer an approval question"),
    ("Ctrl-C twice, Ctrl-D", "leave whiz"),
]


class SlashCommands:
    """Runs one slash command line against the app's session."""

    def __init__(self, app: Screen):
        self.app = app
        self._handlers: dict[str, Callable[[str], Awaitable[None]]] = {
            "help": self.help,
            "undo": self.undo,
            "diff": self.diff,
            "model": self.model,
            "mode": self.mode,
            "approval": self.approval,
            "compact": self.compact,
            "init": self.init,
            "clear": self.clear,
            "resume": self.resume,
            "exit": self.exit,
        }

    def say(self, text: str, style: str = "") -> None:
        self.app.scrollback.print(Text(text, style=style))

    async def run(self, line: str) -> None:
        name, _, args = line.strip().removeprefix("/").partition(" ")
        command = next((c for c in COMMANDS if c.name == name.lower()), None)
        if command is None:
            self.say(f"unknown command /{name}; /help lists them", "red")
            return
        if self.app.running and not command.while_running:
            self.say(f"/{command.name} waits until the agent is done: press Esc to stop it first", "yellow")
            return
        try:
            await self._handlers[command.name](args.strip())
        except (WhizAgentError, ClientError) as exc:
            self.say(f"/{command.name} failed: {exc.message}", "red")
        self.app.invalidate()

    async def help(self, args: str) -> None:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for command in COMMANDS:
            table.add_row(Text(command.usage), Text(command.help))
        table.add_row("", "")
        for keys, what in KEYS:
            table.add_row(Text(keys), Text(what))
        self.app.scrollback.print(table)

    async def undo(self, args: str) -> None:
        try:
            restored = self.app.session.undo()
        except WhizError as exc:  # a file changed since that turn in a way undo cannot merge
            self.say(exc.message, "red")
            return
        if restored is None:
            self.say("nothing to undo in this session", "yellow")
        elif not restored:
            self.say("the files were already as before that turn")
        else:
            self.say(f"↶ restored {', '.join(restored)}", "bold green")

    async def diff(self, args: str) -> None:
        text = sessions.net_diff(self.app.session)
        if not text:
            self.say("no changes by the agent in this session")
            return
        self.app.scrollback.print(render_diff(text))

    async def model(self, args: str) -> None:
        client = await self.app.session.routed.client()
        if not isinstance(client, WhizModel):
            label = self.app.session.router.current
            self.say(
                f"the {label} model is {self.app.model_name} (not a whiz server's: /model cannot switch it)"
            )
            return
        async with HttpClient(
            api_base(client.socket.url), self.app.session.options.fast.api_key, timeout_s=10
        ) as http:
            served = await http.models()
        if not args:
            for name in served:
                mark = "●" if name == self.app.model_name else " "
                self.say(f"{mark} {name}")
            self.say("/model NAME switches", "dim")
            return
        if args not in served:
            self.say(f"{args!r} is not served here; the server lists: {', '.join(served)}", "red")
            return
        client.model = args
        self.app.model_names[self.app.session.router.current] = args
        self.say(f"model: {args}", "green")

    async def mode(self, args: str) -> None:
        router = self.app.session.router
        deep = describe_deep(self.app.session.options.deep)
        if not args:
            for each in Mode:
                mark = "●" if each is router.mode else " "
                self.say(f"{mark} {each:5} {each.help(deep)}")
            self.say(f"the {router.current} model answers now · /mode NAME switches", "dim")
            return
        try:
            mode = Mode.named(args.lower())
        except ValueError as exc:
            self.say(f"{exc}; staying in {router.mode} mode", "red")
            return
        if mode is router.mode:
            self.say(f"already in {mode} mode")
            return
        switches, heal_n = len(router.changes), self.app.session.heal_n
        try:
            await self.app.session.switch_mode(mode, reason=f"you chose /mode {mode}")
        except SetupError as exc:
            self.say(f"could not switch to {mode} mode: {exc.message}; staying in {router.mode} mode", "red")
            return
        await self.app.name_models()
        when = "from the agent's next step" if self.app.running else "from the next task"
        if router.pinned:
            when = "from the next task (the safety policy sent this one to deep)"
        if len(router.changes) == switches:  # the same model answers: no mode_change to show
            self.say(f"{mode} mode {when}: {mode.help(deep)}", "bold cyan")
        else:
            self.say(f"{mode} mode {when}", "dim")
        self.say_healing(heal_n)

    def say_healing(self, before: int) -> None:
        """A line when the healing steps came on or went off (they follow the mode)."""
        modes = self.app.session
        if modes.heal_n == before:
            return
        if modes.heal_n:
            test_cmd = modes.options.agent.test_cmd
            self.say(f"healing on: {modes.heal_n} candidates per step, `{test_cmd}` picks", "cyan")
        else:
            self.say("healing off: one reply per step", "dim")

    async def approval(self, args: str) -> None:
        agent = self.app.session.agent
        if not args:
            for mode in ApprovalMode:
                mark = "●" if mode is agent.approvals.mode else " "
                self.say(f"{mark} {mode.value}")
            self.say("/approval MODE switches", "dim")
            return
        try:
            mode = ApprovalMode(args.lower())
        except ValueError:
            choices = ", ".join(m.value for m in ApprovalMode)
            self.say(f"no approval mode {args!r}; choose {choices}", "red")
            return
        set_approval(agent, mode)
        self.say(f"approval: {mode.value}", "green")

    async def compact(self, args: str) -> None:
        session = self.app.session
        if session.agent.context_window is None:
            self.say("the model's context window is not known: nothing to compact against", "yellow")
            return
        done = await session.compact()  # the view shows the context_compacted item
        if done is None:
            self.say("nothing to compact yet")

    async def init(self, args: str) -> None:
        if args not in ("", "--force", "force"):
            self.say(f"/init takes --force or nothing, not {args!r}", "red")
            return
        agent = self.app.session.agent
        try:
            written = write_agents_md(agent.ws, force=bool(args))
        except AgentsFileExists as exc:
            self.say(exc.message, "yellow")
            return
        self.say(f"{'replaced' if written.replaced else 'wrote'} {written.path}:", "bold green")
        self.app.scrollback.print(Text(written.text))
        agent.project = read_instructions(agent.ws, agent.config.instructions_tokens)
        agent.instructions = agent.default_instructions()
        self.say("the agent follows it from the next task; edit it to say what the map cannot", "dim")

    async def clear(self, args: str) -> None:
        info = sessions.start_new(self.app.session)  # a new id: no other whiz holds it
        self.app.clear_screen()
        self.say(f"new conversation {info.id}", "dim")

    async def resume(self, args: str) -> None:
        session = self.app.session
        if not args:
            rows = sessions.recent(session)
            if not rows:
                self.say("no stored sessions in this folder")
                return
            for info in rows:
                turns = sessions.turns(session, info)
                when = datetime.datetime.fromtimestamp(info.updated_at).strftime("%Y-%m-%d %H:%M")
                first = turns[0].task.splitlines()[0][:60] if turns else "(no turns)"
                mark = "●" if info.id == session.id else " "
                self.say(f"{mark} {info.id}  {when}  {len(turns)} turn(s)  {first}")
            self.say("/resume ID continues one (a unique prefix will do)", "dim")
            return
        try:
            info = sessions.resume(session, args)
        except SetupError as exc:  # another whiz has it open
            self.say(exc.message, "red")
            return
        if info is None:
            self.say(f"no single session matches {args!r}; /resume lists them", "red")
            return
        self.app.show_conversation(info)
        # The mode, healing and test command come back as `whiz resume` restores them.
        self.say(await self.app.session.follow_session(), "bold cyan")
        await self.app.name_models()

    async def exit(self, args: str) -> None:
        self.app.quit()


def set_approval(agent: Agent, mode: ApprovalMode) -> None:
    """Change the agent's approval mode; the instructions change with read-only."""
    was_read_only = agent.approvals.mode is ApprovalMode.READ_ONLY
    agent.approvals.mode = mode
    agent.config.approval = mode
    if was_read_only != (mode is ApprovalMode.READ_ONLY):
        agent.instructions = agent.default_instructions()


def describe_deep(deep: DeepSettings) -> str:
    """Where the deep model is, in a few words."""
    if deep.base_url:
        return f"{deep.model or 'the upstream model'} at {deep.base_url}"
    draft = f" with {deep.draft_model} drafting" if deep.draft_model else ""
    return f"{deep.local_model}{draft}, started in this process on first use"
