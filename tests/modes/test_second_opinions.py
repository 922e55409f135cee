"""A pass fitted to the few cases the tests show: where the calls the test files make can be varied
into inputs they do not try, two more rewrites are tested after the first pass, and the passing
one that agrees with the most others on those inputs is applied."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.agent.project.found_fixtures import write
from tests.modes.test_found_turn import items, session
from whiz.agent.project.workspace import Workspace
from whiz.modes.probes import Probes, agreed, find_probes, fitted

SOLUTION = """def clamp(x, lo, hi):
    if x > hi:
        return hi
    if x < lo:
        return hi
    return x
"""
CHECK = "from solution import clamp\n\nassert clamp(-1, 5, 9) == 5\nassert clamp(12, 5, 9) == 9\n"
TESTS = f"{shlex.quote(sys.executable)} check_clamp.py"
TASK = "Fix the bug in the function clamp in solution.py"
# Passes by returning the one value the tests want: a constant of theirs.
SPECIAL_CASE = SOLUTION.replace("    if x < lo:\n        return hi", "    if x < lo:\n        return 5")
FIXED = SOLUTION.replace("    if x < lo:\n        return hi", "    if x < lo:\n        return lo")
WRONG = SOLUTION.replace("    if x < lo:\n        return hi", "    if x < lo:\n        return x")


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def workspace(tmp_path: Path) -> Path:
    return write(tmp_path / "ws", {"solution.py": SOLUTION, "check_clamp.py": CHECK})


def test_the_probes_are_the_tests_calls_with_one_constant_moved(tmp_path):
    root = workspace(tmp_path)
    (root / "check_more.py").write_text(
        "from solution import clamp\n\nvalues = [1]\nassert clamp(values[0], 0, 3) == 1\n"
    )
    probes = find_probes(Workspace(root), f"{TESTS} && python check_more.py")
    assert probes.imports == ["from solution import clamp"]
    assert "clamp(-1, 6, 9)" in probes.calls and "clamp(-2, 5, 9)" in probes.calls
    assert "clamp(-1, 5, 9)" not in probes.calls  # what the tests try already
    assert not any("values" in call for call in probes.calls)  # a variable the test built
    assert not find_probes(Workspace(root), "pytest -q")  # no test file named


def test_the_candidate_most_others_agree_with_wins_and_the_first_on_a_tie():
    assert agreed([["0", "0"], ["1", "2"], ["1", "2"]]) == 1
    assert agreed([["0", "0"], ["1", "2"]]) == 0
    assert agreed([None, ["1"], ["1"]]) == 1


async def test_a_special_case_that_passes_first_loses_to_two_rewrites_that_agree(tmp_path):
    root = workspace(tmp_path)
    s, events = await session(
        root, [], [[fenced(SPECIAL_CASE)], [fenced(FIXED)], [fenced(FIXED)]], test_cmd=TESTS
    )
    try:
        result = await s.run(TASK)
    finally:
        await s.close()
    assert result.ok, result.message
    assert (root / "solution.py").read_text() == FIXED
    (vote,) = items(events, "heal_vote")
    assert vote["chosen"] != vote["candidates"][0] and vote["probes"] > 0


async def test_a_first_pass_the_other_rewrites_do_not_outvote_is_kept(tmp_path):
    root = workspace(tmp_path)
    again = fenced(SPECIAL_CASE.replace("return 5", "return (5)"))  # the same change, written apart
    rewrites = [[fenced(SPECIAL_CASE)], [fenced(WRONG)], [again]]
    s, events = await session(root, [], rewrites, test_cmd=TESTS)
    try:
        result = await s.run(TASK)
    finally:
        await s.close()
    assert result.ok, result.message
    assert (root / "solution.py").read_text() == SPECIAL_CASE
    (vote,) = items(events, "heal_vote")
    assert vote["kept_first"] and vote["agreeing_with_first"] == 1


async def test_a_first_pass_with_nothing_of_the_tests_in_it_ends_the_heal(tmp_path):
    root = workspace(tmp_path)
    s, events = await session(root, [], [[fenced(FIXED)], [fenced(WRONG)]], test_cmd=TESTS)
    try:
        result = await s.run(TASK)
    finally:
        await s.close()
    assert result.ok, result.message
    assert (root / "solution.py").read_text() == FIXED
    assert items(events, "heal_vote") == [] and len(items(events, "heal_candidate")) == 1


async def test_tests_whose_calls_cannot_be_varied_end_the_heal_at_the_first_pass(tmp_path):
    root = workspace(tmp_path)
    tests = f'{shlex.quote(sys.executable)} -c "from solution import clamp; assert clamp(-1, 5, 9) == 5"'
    s, events = await session(root, [], [[fenced(SPECIAL_CASE)], [fenced(FIXED)]], test_cmd=tests)
    try:
        result = await s.run(TASK)
    finally:
        await s.close()
    assert result.ok, result.message
    assert (root / "solution.py").read_text() == SPECIAL_CASE
    assert items(events, "heal_vote") == [] and len(items(events, "heal_candidate")) == 1


def test_a_change_looks_fitted_where_it_brings_in_the_tests_constants(tmp_path):
    probes = find_probes(Workspace(workspace(tmp_path)), TESTS)
    assert fitted(probes, SOLUTION, SPECIAL_CASE)
    assert not fitted(probes, SOLUTION, FIXED)
    assert not fitted(probes, SOLUTION, SOLUTION.replace("return hi\n    return x", "return 0\n    return x"))
    words = Probes(shown=frozenset({"Hi, hi!"}))
    assert fitted(words, "s = t", 's = t.replace("!", "")') and not fitted(words, "s = t", "s = t.strip()")
