"""A turn with no test command is judged by the checks the user already wrote: they choose among
the deep model's rewrites where some fail on the code as it is, catch an edit that breaks them
where all pass, are not run in a read-only session, and the turn's message and its
`found_checks` item say which ran and how they came out."""

from __future__ import annotations

from pathlib import Path

from tests.agent.conftest import sr
from tests.agent.project.found_fixtures import CLAMP_FIXED, DOCTESTS, EXAMPLES, write
from whiz.agent.approvals import ApprovalMode
from whiz.agent.config import AgentConfig
from whiz.agent.events import Collector
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.modes.candidates import ScriptedCandidates
from whiz.modes.found_turn import FOUND_HEAL_N
from whiz.modes.notices import describe
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import AgentSession, SessionOptions

TASK = "Fix the bug in the function clamp in solution.py"
FIXED = "```python\n" + CLAMP_FIXED + "```"
STILL_WRONG = FIXED.replace("return lo", "return x")


async def session(
    root: Path, deep: list[str] | ScriptedModel, rewrites: list[list[str]], **agent
) -> tuple[AgentSession, Collector]:
    events = Collector()
    model = deep if isinstance(deep, ScriptedModel) else ScriptedModel(list(deep))
    pool = ScriptedPool(
        clients={"fast": lambda: ScriptedModel([]), "deep": lambda: model},
        sources={"fast": ScriptedCandidates([]), "deep": ScriptedCandidates(rewrites)},
    )
    options = SessionOptions(
        root, agent=AgentConfig(**agent), mode="auto", home=root.parent / "home", mutants=False
    )
    return await AgentSession.open(options, sink=events, pool=pool), events


def items(events: Collector, kind: str) -> list[dict]:
    return [e["item"] for e in events.events if e["type"] == "item.completed" and e["item"]["type"] == kind]


async def test_failing_doctests_choose_the_rewrite_that_passes_them(tmp_path):
    root = write(tmp_path / "ws", DOCTESTS)
    s, events = await session(root, [], [[STILL_WRONG], [FIXED]])
    try:
        result = await s.run(TASK)
    finally:
        await s.close()
    assert result.ok, result.message
    assert (root / "solution.py").read_text() == CLAMP_FIXED
    (found,) = items(events, "found_checks")
    assert found["use"] == "choose" and found["ran"]
    assert found["checks"] == [
        {
            "kind": "doctest",
            "where": "solution.py:4",
            "text": "the doctests in clamp's docstring",
            "before": "fail",
            "after": "pass",
        }
    ]
    statuses = [c["status"] for c in items(events, "heal_candidate")]
    assert statuses[:2] == ["failed", "passed"] and len(statuses) <= FOUND_HEAL_N
    assert "checks found in the code: 1 of 1 pass (1 docstring with doctests of clamp)" in result.message
    assert s.heal_n == 0 and s.agent.config.test_cmd is None  # the next turn starts as before
    assert s.healing is not None and s.healing.healer.settings.hypotheses == 1


async def test_an_edit_that_breaks_passing_examples_is_sent_back(tmp_path):
    # The examples pass on the code as it is: they cannot choose a fix, but they catch a break.
    root = write(tmp_path / "ws", EXAMPLES)
    (root / "solution.py").write_text(
        EXAMPLES["solution.py"].replace('    last_word_length("fly me   ") -> 2\n', "")
    )
    breaks = sr("solution.py", '    words = text.split(" ")', '    words = text.split("o")')
    mends = sr("solution.py", '    words = text.split("o")', "    words = text.split()")
    deep = ScriptedModel([breaks, mends])
    s, events = await session(root, deep, [])
    try:
        result = await s.run("Fix the bug in last_word_length in solution.py")
    finally:
        await s.close()
    assert result.ok, result.message
    (found,) = items(events, "found_checks")
    assert found["use"] == "guard" and [c["after"] for c in found["checks"]] == ["pass", "pass"]
    said = deep.requests[1].items[-1]["content"]  # the broken example's verdict, sent back
    assert "returned 3, expected 5" in said
    assert "checks found in the code: 2 of 2 pass" in result.message


async def test_a_read_only_session_finds_the_checks_and_says_it_did_not_run_them(tmp_path):
    root = write(tmp_path / "ws", DOCTESTS)
    s, events = await session(
        root, ["clamp returns hi where it should return lo."], [], approval=ApprovalMode.READ_ONLY
    )
    try:
        result = await s.run(TASK)
    finally:
        await s.close()
    (found,) = items(events, "found_checks")
    assert found["use"] == "not_run" and not found["ran"] and found["checks"][0]["before"] is None
    assert "not run: the session is read-only" in result.message
    assert not list(root.glob("__pycache__"))


async def test_a_test_command_given_leaves_the_found_checks_alone(tmp_path):
    root = write(tmp_path / "ws", DOCTESTS)
    s, events = await session(root, ["done"], [], test_cmd="true", found_checks=True)
    try:
        await s.run("Explain clamp in solution.py")
    finally:
        await s.close()
    assert items(events, "found_checks") == []


async def test_passing_checks_leave_a_new_behaviour_alone_and_a_rename_gets_none(tmp_path):
    # All pass now, and the task asks for new behaviour: the old examples may rightly change.
    root = write(tmp_path / "ws", DOCTESTS)
    (root / "solution.py").write_text(CLAMP_FIXED)
    change = sr("solution.py", "    if x > hi:\n        return hi", "    if x > hi:\n        return None")
    s, events = await session(root, [change], [])
    try:
        result = await s.run("Make clamp in solution.py return None above hi")
        assert result.ok, result.message
        (found,) = items(events, "found_checks")
        assert found["use"] == "passing" and found["checks"][0]["before"] == "pass"
        assert "which they need not hold: not used" in result.message
        assert describe(found) == f"checks found in the code ({found['label']}): {found['reason']}"
    finally:
        await s.close()
    rename = sr("solution.py", "def clamp(x, lo, hi):", "def bound(x, lo, hi):")
    s, events = await session(root, ["", rename], [])
    try:
        await s.run("Rename clamp to bound in solution.py")
    finally:
        await s.close()
    assert items(events, "found_checks") == []


async def test_found_checks_off_leaves_the_turn_as_it_was(tmp_path):
    root = write(tmp_path / "ws", DOCTESTS)
    s, events = await session(root, ["clamp returns hi below lo."], [], found_checks=False)
    try:
        await s.run(TASK)
    finally:
        await s.close()
    assert items(events, "found_checks") == [] and items(events, "heal_candidate") == []
