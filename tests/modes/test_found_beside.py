"""With a test command, the checks the code already holds run beside it: a rewrite that passes the
tests but breaks the function's own doctests (a special case fitted to the one case the tests
show) is no pass while another rewrite keeps both, and is applied only where none does."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.agent.project.found_fixtures import REPO_TESTS, write
from tests.modes.test_found_turn import items, session
from whiz.agent.project.found_checks import find_checks
from whiz.agent.project.workspace import Workspace
from whiz.modes.found_turn import not_run_by
from whiz.modes.healing import GUARD_PATIENCE

SOLUTION = '''def clamp(x, lo, hi):
    """Clamp x into [lo, hi].

    >>> clamp(-5, 1, 3)
    1
    """
    if x > hi:
        return hi
    if x < lo:
        return hi
    return x
'''
TASK = "Fix the bug in the function clamp in solution.py"
TESTS = f'{shlex.quote(sys.executable)} -c "from solution import clamp; assert clamp(-1, 0, 3) == 0"'
# Both pass the test command; only the second keeps the docstring's example.
SPECIAL_CASE = (
    "```python\n"
    + SOLUTION.replace("        return hi\n    return x", "        return 0\n    return x")
    + "```"
)
FIXED = SOLUTION.replace("        return hi\n    return x", "        return lo\n    return x")


def workspace(tmp_path: Path) -> Path:
    return write(tmp_path / "ws", {"solution.py": SOLUTION})


async def test_a_rewrite_that_passes_the_tests_but_breaks_the_doctests_loses_to_one_that_keeps_them(tmp_path):
    root = workspace(tmp_path)
    s, events = await session(root, [], [[SPECIAL_CASE], ["```python\n" + FIXED + "```"]], test_cmd=TESTS)
    try:
        result = await s.run(TASK)
    finally:
        await s.close()
    assert result.ok, result.message
    assert (root / "solution.py").read_text() == FIXED
    first, second = items(events, "heal_candidate")[:2]
    assert first["status"] == "failed" and first["checks_failed"]
    assert "returned 0" in first["test_output"] or "Got:\n    0" in first["test_output"]
    assert second["status"] == "passed"
    (found,) = items(events, "found_checks")
    assert found["use"] == "beside" and found["checks"][0]["before"] == "fail"
    assert found["checks"][0]["after"] == "pass"
    assert "checks found in the code: 1 of 1 pass" in result.message
    assert s.healing is not None and s.healing.healer.guard is None  # for this turn only
    assert s.agent.config.test_cmd == TESTS


async def test_where_no_rewrite_keeps_the_doctests_the_tests_alone_decide(tmp_path):
    root = workspace(tmp_path)
    s, events = await session(root, [], [[SPECIAL_CASE]], test_cmd=TESTS)
    try:
        result = await s.run(TASK)
    finally:
        await s.close()
    assert result.ok, result.message  # the tests pass on what was applied
    assert "return 0" in (root / "solution.py").read_text()
    assert "checks found in the code: 0 of 1 pass" in result.message


async def test_after_three_rewrites_that_break_the_doctests_the_best_of_them_is_applied(tmp_path):
    # The checks may ask what no rewrite gives: the rest of the ladder would cost minutes.
    root = workspace(tmp_path)
    zeros = ["0", "lo - lo", "0 * x", "abs(0)", "int(0)", "round(0)", "0 + 0", "-0"]
    rewrites = [[SPECIAL_CASE.replace("return 0\n    return x", f"return {z}\n    return x")] for z in zeros]
    s, events = await session(root, [], rewrites, test_cmd=TESTS)
    try:
        result = await s.run(TASK)
    finally:
        await s.close()
    assert result.ok, result.message
    tested = [c for c in items(events, "heal_candidate") if c["checks_failed"]]
    # The heal stops there (one more may already be under test beside them), and the turn's next
    # heal, after the applied one fails the checks again, stops there too: never all eight.
    assert GUARD_PATIENCE <= len(tested) < len(zeros)
    applied = (root / "solution.py").read_text()
    (zero,) = [
        z
        for z in zeros
        if applied == SOLUTION.replace("return hi\n    return x", f"return {z}\n    return x")
    ]
    assert any(f"+        return {zero}\n" in c["diff"] for c in tested)  # the best of those tested


async def test_a_task_that_asks_for_new_behaviour_runs_the_tests_alone(tmp_path):
    root = workspace(tmp_path)
    s, events = await session(root, [], [[SPECIAL_CASE]], test_cmd=TESTS)
    try:
        await s.run("Make clamp in solution.py return 0 below lo")
    finally:
        await s.close()
    assert items(events, "found_checks") == []
    assert not any(c["checks_failed"] for c in items(events, "heal_candidate"))


def test_the_repository_tests_the_command_runs_are_not_run_again(tmp_path):
    root = write(tmp_path / "ws", REPO_TESTS)
    found = find_checks(Workspace(root), "Fix the bug in rect_area in shapes/area.py")
    assert [c.kind for c in found.checks] == ["test"] * 3
    assert not not_run_by(found, "pytest -q tests/test_area.py")
    assert not not_run_by(found, "pytest -q")  # it runs them all
    assert len(not_run_by(found, "pytest -q tests/test_other.py").checks) == 3
