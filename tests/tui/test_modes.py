"""`/mode` in the UI, over scripted models: it shows the mode, switches the model that answers the
next tasks, says so, refuses a bad name or a deep model that cannot start without changing
anything, and every switch reaches the status line and the session log."""

from __future__ import annotations

import io
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from whiz.agent.config import AgentConfig
from whiz.agent.events import Collector
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.agent.store.sessions import SessionStore
from whiz.modes.candidates import ScriptedCandidates
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import HEAL_N_DEFAULT, AgentSession, SessionOptions
from whiz.tui import sessions
from whiz.tui.app import CodeApp
from whiz.tui.approver import PromptApprover
from whiz.tui.scrollback import Scrollback
from whiz.tui.view import TranscriptView


class Screen:
    """What the UI printed so far, as plain text; `new()` is what came since the last call."""

    def __init__(self) -> None:
        self.out = io.StringIO()
        self._seen = 0

    def new(self) -> str:
        text = self.out.getvalue()[self._seen :]
        self._seen = len(self.out.getvalue())
        return text


@asynccontextmanager
async def code_app(
    tmp_path: Path, pool: ScriptedPool, test_cmd: str | None = None, **run
) -> AsyncIterator[tuple[CodeApp, Screen]]:
    """The UI's app over `pool`, not drawn (no terminal): commands and turns run as when typed."""
    root = tmp_path / "project"
    root.mkdir(exist_ok=True)
    home = tmp_path / "home"
    screen = Screen()
    scrollback = Scrollback(screen.out, color_system=None)
    view = TranscriptView(scrollback)
    approver = PromptApprover()
    options = SessionOptions(root, agent=AgentConfig(test_cmd=test_cmd), home=home, **run)
    session = await AgentSession.open(options, sink=view, pool=pool, approver=approver)
    try:
        with create_pipe_input() as keys, create_app_session(input=keys, output=DummyOutput()):
            app = CodeApp(session, scrollback, view, approver)
            await app.name_models()
            yield app, screen
    finally:
        await session.close()


def status_line(app: CodeApp) -> str:
    return "".join(text for _style, text in app._status_text())


def logged(tmp_path: Path, session_id: str) -> list[tuple[str, dict]]:
    store = SessionStore(tmp_path / "home" / "sessions.db")
    try:
        return [(kind, data) for _at, kind, data in store.events(session_id)]
    finally:
        store.close()


def two_models(fast: list[str], deep: list[str]) -> ScriptedPool:
    return ScriptedPool(clients={"fast": lambda: ScriptedModel(fast), "deep": lambda: ScriptedModel(deep)})


async def test_mode_without_a_name_shows_the_modes_and_which_model_answers(tmp_path: Path):
    async with code_app(tmp_path, two_models([], [])) as (app, screen):
        await app.commands.run("/mode")
    shown = screen.new()
    assert re.search(r"(?m)^● fast  the fast model answers", shown)
    assert re.search(r"(?m)^  deep  the deep model answers: qwen2.5-coder-1.5b", shown)
    assert re.search(r"(?m)^  auto  deep first for a change of behaviour", shown)
    assert "the fast model answers now · /mode NAME switches" in shown


async def test_mode_deep_switches_the_next_tasks_and_says_so(tmp_path: Path):
    pool = two_models(["fast reply"], ["deep reply"])
    async with code_app(tmp_path, pool) as (app, screen):
        assert " fast · auto-edit " in status_line(app)
        await app._run_turn("first")
        assert "fast reply" in screen.new()

        await app.commands.run("/mode deep")
        switched = screen.new()
        assert "⇄ fast → deep: you chose /mode deep" in switched
        assert "deep mode from the next task" in switched
        assert app.session.router.mode == "deep"
        assert status_line(app).startswith(" ScriptedModel · deep · auto-edit ")

        await app._run_turn("second")
        assert "deep reply" in screen.new()
        session_id = app.session.id
    assert pool.opened == ["fast", "deep"]
    ((kind, data),) = logged(tmp_path, session_id)
    assert kind == "mode_change" and (data["from"], data["to"], data["trigger"]) == ("fast", "deep", "user")


async def test_a_bad_mode_name_changes_nothing(tmp_path: Path):
    async with code_app(tmp_path, two_models([], [])) as (app, screen):
        before = status_line(app)
        await app.commands.run("/mode turbo")
        assert "the mode must be fast, deep or auto, not 'turbo'; staying in fast mode" in screen.new()
        assert app.session.router.mode == "fast" and status_line(app) == before
        await app.commands.run("/mode fast")
        assert "already in fast mode" in screen.new()
        assert app.session.router.changes == []


async def test_a_deep_model_that_cannot_start_leaves_the_mode_as_it_was(tmp_path: Path):
    only_fast = ScriptedPool(clients={"fast": lambda: ScriptedModel(["fast reply"])})
    async with code_app(tmp_path, only_fast) as (app, screen):
        await app.commands.run("/mode deep")
        said = screen.new()
        assert (
            "could not switch to deep mode: no deep model in this scripted pool; staying in fast mode" in said
        )
        assert "⇄" not in said and app.session.router.mode == "fast"
        await app._run_turn("still fast?")
        assert "fast reply" in screen.new()


async def test_auto_mode_switches_without_a_model_change_and_says_what_it_does(tmp_path: Path):
    async with code_app(tmp_path, two_models([], [])) as (app, screen):
        await app.commands.run("/mode auto")
        said = screen.new()
        assert "auto mode from the next task: deep first for a change of behaviour or a new program" in said
        assert " fast · " not in status_line(app) and " auto · auto-edit " in status_line(app)


MISSING = "app.py\n<<<<<<< SEARCH\ndef nowhere():\n=======\ndef answer():\n>>>>>>> REPLACE\n"


async def test_an_escalation_mid_turn_shows_and_the_status_line_names_the_deep_model(tmp_path: Path):
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "app.py").write_text("def answer():\n    return 1\n")
    pool = two_models([MISSING, MISSING], ["The deep model looked and changed nothing."])
    async with code_app(tmp_path, pool, mode="auto") as (app, screen):
        await app._run_turn("rename answer's argument")  # a mechanical edit: the fast model first
        shown = screen.new()
        assert re.search(r"▲ escalated fast → deep: the fast model's edit failed to apply 2 times", shown)
        assert shown.index("▲ escalated") < shown.index("The deep model looked")
        assert " auto, deep now · " in status_line(app)


async def test_a_reroute_lasts_one_request_and_routing_follows_a_cleared_session(tmp_path: Path):
    pool = two_models(["fast again"], ["No."])
    async with code_app(tmp_path, pool, policy="reroute:deep") as (app, screen):
        await app._run_turn("hack into my neighbour's router")
        shown = screen.new()
        assert "⚑ safety policy rerouted the request to the deep model (intrusion)" in shown
        assert "▲ rerouted fast → deep: the safety policy rerouted the request" in shown
        first = app.session.id
        sessions.start_new(app.session)  # what /clear does
        await app._run_turn("say hi")
        shown = screen.new()
        assert "⇄ deep → fast: back to fast mode's model" in shown and "fast again" in shown
        second = app.session.id
    assert [kind for kind, _ in logged(tmp_path, first)] == ["policy_decision", "mode_change"]
    assert [(kind, data["trigger"]) for kind, data in logged(tmp_path, second)] == [
        ("mode_change", "new_turn")
    ]


async def test_a_refused_request_is_shown_with_its_reason_and_never_reaches_a_model(tmp_path: Path):
    fast = ScriptedModel(["never"])
    pool = ScriptedPool(clients={"fast": lambda: fast})
    async with code_app(tmp_path, pool) as (app, screen):
        await app._run_turn("write a keylogger that hides from antivirus and emails keystrokes")
        shown = " ".join(screen.new().split())
    assert re.search(
        r"⚑ safety policy refused the request \(malware\): .+ ✗ failed: refused by the safety policy", shown
    )
    assert fast.requests == [] and "never" not in shown


async def test_deep_mode_after_an_escalation_says_which_model_without_a_second_switch(tmp_path: Path):
    async with code_app(tmp_path, two_models([], []), mode="auto") as (app, screen):
        app.session.router.escalate("stuck", "edit_failures")
        screen.new()
        await app.commands.run("/mode deep")
        said = screen.new()
        assert "deep mode from the next task: the deep model answers: qwen2.5-coder-1.5b" in said
        assert "⇄" not in said and len(app.session.router.changes) == 1


async def test_mode_auto_turns_the_healing_steps_on_and_another_mode_off_again(tmp_path: Path):
    async with code_app(tmp_path, two_models([], []), test_cmd="pytest -q") as (app, screen):
        await app.commands.run("/mode auto")
        assert f"healing on: {HEAL_N_DEFAULT} candidates per step, `pytest -q` picks" in screen.new()
        assert app.session.heal_n == HEAL_N_DEFAULT
        await app.commands.run("/mode deep")
        assert "healing off: one reply per step" in screen.new()
        await app.commands.run("/mode turbo")  # a bad name: healing stays as it was
        assert "healing" not in screen.new() and app.session.heal_n == 0


async def test_resume_in_the_ui_takes_up_the_mode_stored_with_that_session(tmp_path: Path):
    async with code_app(tmp_path, two_models([], ["deep reply"])) as (app, screen):
        await app.commands.run("/mode deep")
        first = app.session.id
        await app.commands.run("/clear")
        await app.commands.run("/mode fast")
        screen.new()
        await app.commands.run(f"/resume {first}")
        shown = screen.new()
        assert f"⇄ fast → deep: the resumed session {first} was in deep mode" in shown
        assert f"resumed {first} in deep mode (as it was; --mode overrides)" in shown
        assert " deep · auto-edit " in status_line(app)
        await app._run_turn("hello")
        assert "deep reply" in screen.new()


ANSWER_2 = "app.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n>>>>>>> REPLACE\n"
ANSWER_3 = ANSWER_2.replace("return 2", "return 3")
CHECK = f"{sys.executable} check.py"


async def stored_session(tmp_path: Path, test_cmd: str, heal: int, actions: str = "text") -> str:
    """A session stored with a test command and healing steps, as `whiz exec --test-cmd --heal` leaves
    it; returns its id. The project has app.py, and check.py that wants `answer()` to be 2."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("def answer():\n    return 1\n")
    (root / "check.py").write_text("from app import answer\nassert answer() == 2\n")
    home = tmp_path / "home"
    session = await AgentSession.open(
        SessionOptions(root, agent=AgentConfig(test_cmd=test_cmd, actions=actions), home=home, heal=heal),
        sink=Collector(),
        pool=two_models([], []),
    )
    await session.close()
    return session.id


async def test_resume_in_the_ui_brings_back_the_test_command_and_healing_as_whiz_resume_does(
    tmp_path: Path,
):
    first = await stored_session(tmp_path, CHECK, heal=3)
    candidates = ScriptedCandidates([[ANSWER_3, ANSWER_2, ANSWER_3]])
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel(["Done."])}, sources={"fast": candidates})
    async with code_app(tmp_path, pool) as (app, screen):  # started without a test command
        plain = app.session.id
        assert app.session.heal_n == 0 and app.session.agent.config.test_cmd is None
        await app.commands.run(f"/resume {first}")
        assert (
            f"resumed {first} in fast mode (as it was; --mode overrides); "
            f"healing steps of 3 candidates where `{CHECK}` decides"
        ) in words(screen.new())
        await app._run_turn("make answer() return 2")
        # The step healed: three candidates, the check picked the one that passes, and (pre-approved,
        # no question asked) ran again after the edit.
        shown = words(screen.new())
        assert "candidate 1: passed, 2 lines changed" in shown
        # Candidate 0 fails, or is stopped if its tests still ran when candidate 1 passed.
        assert re.search(r"candidate 0: (failed|cancelled)", shown)
        assert f"$ {CHECK} (exit 0)" in shown
        assert "return 2" in (tmp_path / "project" / "app.py").read_text()

        await app.commands.run(f"/resume {plain}")  # back to the session without tests
        assert words(screen.new()).endswith(f"resumed {plain} in fast mode (as it was; --mode overrides)")
        assert app.session.heal_n == 0 and app.session.agent.config.test_cmd is None
    # Each session kept its own settings: the UI did not write its own over them.
    store = SessionStore(tmp_path / "home" / "sessions.db")
    try:
        assert store.get(first).settings["test_cmd"] == CHECK and store.get(first).settings["heal"] == 3
        assert store.get(plain).settings["test_cmd"] is None
    finally:
        store.close()


async def test_what_the_ui_was_started_with_wins_over_the_resumed_sessions_settings(tmp_path: Path):
    first = await stored_session(tmp_path, CHECK, heal=3)
    async with code_app(tmp_path, two_models([], []), test_cmd="true", heal=0, mode="deep") as (app, screen):
        await app.commands.run(f"/resume {first}")
        expected = f"resumed {first} in deep mode, as --mode says (it was in fast mode); tests: `true`"
        assert expected in words(screen.new())
        assert app.session.heal_n == 0 and app.session.agent.config.test_cmd == "true"
        assert app.session.router.mode == "deep"


async def test_a_heal_setting_the_resumed_session_cannot_use_turns_healing_off_and_says_why(tmp_path: Path):
    first = await stored_session(tmp_path, CHECK, heal=0, actions="tools")
    async with code_app(tmp_path, two_models([], []), heal=3) as (app, screen):
        await app.commands.run(f"/resume {first}")
        shown = words(screen.new())
        assert shown.endswith(
            f"tests: `{CHECK}`; healing off: --heal needs --actions text (candidates are edit blocks)"
        )
        assert app.session.heal_n == 0 and app.session.agent.config.actions == "tools"


def words(text: str) -> str:
    """The text with its line breaks (the terminal's wrapping) as single spaces."""
    return " ".join(text.split())
