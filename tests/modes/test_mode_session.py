"""`ModeSession` across a resume and a `/mode` switch: the mode, the healing setting and the test
command are stored with the session and come back on resume (flags given then win, and a line
says which mode is in force); switching to auto heals exactly as starting in auto does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.agent.conftest import GREET, sr
from whiz.agent.approvals import ApprovalMode
from whiz.agent.config import AgentConfig
from whiz.agent.events import Collector
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.modes.candidates import ScriptedCandidates
from whiz.modes.endpoints import SetupError
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import HEAL_N_DEFAULT, AgentSession, SessionOptions

RENAME = "greet.py\n<<<<<<< SEARCH\ndef say_hello(name):\n=======\ndef greet(name):\n>>>>>>> REPLACE\n"
WRONG = RENAME.replace("def greet(name):", "def greet(name, extra):")


@pytest.fixture
def project(project: Path) -> Path:
    """conftest's project, with a check the rename passes (`TEST_CMD`)."""
    (project / "check.py").write_text("from greet import greet\nassert greet('x') == 'Hello, x'\n")
    return project


TEST_CMD = f"{sys.executable} check.py"


class Opened:
    """A `ModeSession` over scripted models, with what it said (notices) and emitted (items)."""

    def __init__(self, project: Path, pool: ScriptedPool):
        self.project = project
        self.pool = pool
        self.notices: list[str] = []
        self.events = Collector()

    async def open(
        self,
        *,
        resume: str | None = None,
        test_cmd: str | None = None,
        approval=ApprovalMode.AUTO_EDIT,
        **run,
    ) -> AgentSession:
        home = self.project.parent / "home"
        # check_edits off: the scripted renames leave say_hello's callers behind
        agent = AgentConfig(test_cmd=test_cmd, approval=approval, check_edits=False)
        return await AgentSession.open(
            SessionOptions(self.project, agent=agent, home=home, resume=resume, **run),
            sink=self.events,
            notice=self.notices.append,
            pool=self.pool,
        )


def two_models(
    fast: list[str],
    deep: list[str],
    candidates: list[list[str]] | None = None,
    deep_candidates: list[list[str]] | None = None,
) -> ScriptedPool:
    return ScriptedPool(
        clients={"fast": lambda: ScriptedModel(list(fast)), "deep": lambda: ScriptedModel(list(deep))},
        sources={
            "fast": ScriptedCandidates(candidates or []),
            "deep": ScriptedCandidates(deep_candidates or []),
        },
    )


async def test_a_resumed_session_comes_back_in_the_mode_it_was_switched_to(project):
    opened = Opened(project, two_models(["fast reply"] * 3, ["deep reply"] * 3))
    session = await opened.open()
    try:
        assert (await session.run("say hi")).message == "fast reply"
        session.set_mode("deep")
    finally:
        await session.close()
    assert opened.notices == []  # a new session: nothing to restore

    session = await opened.open(resume="last")
    try:
        assert session.router.mode == "deep" and session.router.current == "deep"
        assert (await session.run("and again")).message == "deep reply"
    finally:
        await session.close()
    assert opened.notices == [f"resumed {session.id} in deep mode (as it was; --mode overrides)"]
    # The first session asked the fast model; the resumed one connected the deep model only.
    assert opened.pool.opened == ["fast", "deep"]
    changes = [(c["from"], c["to"], c["trigger"]) for c in opened.events.items("mode_change")]
    assert changes == [("fast", "deep", "user")]  # the switch; the resume needed none


async def test_a_mode_given_on_resume_wins_and_is_what_the_next_resume_restores(project):
    opened = Opened(project, two_models(["fast reply"] * 3, ["deep reply"] * 3))
    session = await opened.open(mode="auto")
    await session.close()

    session = await opened.open(resume="last", mode="fast")
    try:
        assert session.router.mode == "fast"
        assert (await session.run("hi")).message == "fast reply"
    finally:
        await session.close()
    assert opened.notices[-1] == f"resumed {session.id} in fast mode, as --mode says (it was in auto mode)"

    session = await opened.open(resume=session.id)
    await session.close()
    assert session.router.mode == "fast"
    assert opened.notices[-1].endswith("in fast mode (as it was; --mode overrides)")


async def test_the_test_command_and_the_healing_setting_come_back_with_the_session(project):
    opened = Opened(project, two_models([], []))
    session = await opened.open(test_cmd=TEST_CMD, heal=3)
    assert session.heal_n == 3
    await session.close()

    session = await opened.open(resume="last")
    await session.close()
    assert session.heal_n == 3 and session.agent.config.test_cmd == TEST_CMD
    assert opened.notices[-1].endswith(
        f"fast mode (as it was; --mode overrides); healing steps of 3 candidates where `{TEST_CMD}` decides"
    )

    session = await opened.open(resume="last", heal=0)  # --heal 0 on the resume turns it off
    await session.close()
    assert session.heal_n == 0
    assert opened.notices[-1].endswith(f"; tests: `{TEST_CMD}`")


async def test_switching_to_auto_heals_as_starting_in_auto_does_and_switching_away_stops(project):
    started_auto = await Opened(project, two_models([], [])).open(test_cmd=TEST_CMD, mode="auto")
    await started_auto.close()
    assert started_auto.heal_n == HEAL_N_DEFAULT

    # Auto's ladder: the fast model's greedy reply, then the deep model's.
    opened = Opened(project, two_models(["The file looks fine to me."], [], [[WRONG]], [[RENAME]]))
    session = await opened.open(test_cmd=TEST_CMD)
    try:
        assert session.heal_n == 0
        session.set_mode("auto")
        assert session.heal_n == HEAL_N_DEFAULT
        result = await session.run("Rename say_hello to greet in greet.py")
        assert result.ok, result.message
        tried = opened.events.items("heal_candidate")
        passed = [(c["round"], c["index"]) for c in tried if c["status"] == "passed"]
        assert passed == [(2, 0)]  # the deep model's rename, not the wrong edit
        assert (project / "greet.py").read_text().startswith("def greet(name):")

        session.set_mode("fast")
        assert session.heal_n == 0
        healed = len(opened.events.items("heal_candidate"))
        answered = await session.run("Is greet.py all right?")
        assert answered.message == "The file looks fine to me."
        assert len(opened.events.items("heal_candidate")) == healed  # one plain reply, no candidates
    finally:
        await session.close()


async def test_a_resume_of_a_session_that_is_not_there_is_one_clear_error(project):
    with pytest.raises(SetupError, match="no session 'sess_nope'"):
        await Opened(project, two_models([], [])).open(resume="sess_nope")


async def test_a_read_only_session_never_heals_so_no_candidate_runs_the_tests(project):
    candidates = ScriptedCandidates([[sr("greet.py", "def say_hello(name):", "def greet(name):")] * 5])
    pool = ScriptedPool(
        clients={"fast": lambda: ScriptedModel(["It says hello."])}, sources={"fast": candidates}
    )
    opened = Opened(project, pool)
    session = await opened.open(test_cmd=TEST_CMD, mode="auto", approval=ApprovalMode.READ_ONLY)
    try:
        assert session.heal_n == 0  # auto mode with a test command heals, but not read-only
        assert session.healing.redraw_n == 0  # nor does a retry draw candidates that run them
        assert (await session.run("What does greet.py do?")).ok
    finally:
        await session.close()
    assert candidates.calls == [] and (project / "greet.py").read_text() == GREET
    with pytest.raises(SetupError, match="read-only"):
        await opened.open(test_cmd=TEST_CMD, heal=3, approval=ApprovalMode.READ_ONLY)
