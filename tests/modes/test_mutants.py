"""One-token changes of a function: each parses, changes one thing, and a heal tests them after the
first rewrite fails, a passing one applied with no further model call."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.modes.test_repair import LOCATED, STATS, WRONG, heal, items, stats_project
from whiz.modes import healing
from whiz.modes.mutants import LONGEST, mutants

CLAMP = """def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi and True:
        return hi
    return x
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return stats_project(tmp_path)


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    return [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=False) if a != b]


def test_every_mutant_parses_and_changes_one_line():
    found = mutants(CLAMP)
    assert found
    for m in found:
        ast.parse(m.source)
        assert len(changed_lines(CLAMP, m.source)) == 1, m.said
    sources = [m.source for m in found]
    assert len(set(sources)) == len(sources)  # no change offered twice
    assert "    if x <= lo:\n" in sources[0]  # comparisons first: the commonest bug
    said = {m.said for m in found}
    assert {"line 2: < for <=", "line 4: > for >=", "line 4: and for or", "line 4: True for False"} <= said


def test_a_method_keeps_its_indent_and_a_limit_holds():
    method = "    def bump(self, by=1):\n        self.n += by + 1\n        return self.n\n"
    found = mutants(method, limit=3)
    assert len(found) == 3
    assert all(line.startswith("    ") for m in found for line in m.source.splitlines())
    assert any("by + 0" in m.source or "by - 1" in m.source for m in mutants(method))


def test_the_changes_a_test_catches_most_often_are_made():
    source = 'import re\n\ndef digits(text, seen=[]):\n    return re.findall(r"\\d", text)[: len(seen)]\n'
    body = source.split("\n\n", 1)[1]
    made = {m.said: m.source for m in mutants(body)}
    assert 'r"\\d+"' in made["line 2: \\d for \\d+"]  # a regex's missing +
    assert "len(seen) + 1" in made["line 2: len(seen) + 1"]  # an off-by-one with no number
    fresh = made["a fresh [] for seen at each call"]  # a mutable default
    assert "seen=None" in fresh and "    if seen is None:\n        seen = []\n" in fresh
    ast.parse(fresh)


def test_code_that_does_not_parse_or_runs_too_long_has_no_mutants():
    assert mutants("def f(:\n    return 1\n") == []
    long = "def f(x):\n" + "    x = x + 1\n" * LONGEST + "    return x\n"
    assert mutants(long) == []
    assert mutants(long.replace("    x = x + 1\n", "", 2))  # within the bound


def test_modulus_and_defaults_are_not_counted_off_by_one():
    # `n % 10` as `n % 11` passes a weak test by chance and is seldom a fix.
    said = {m.said for m in mutants("def last(n, base=10):\n    return n % 10\n")}
    assert not any("10 for" in s for s in said)


def test_a_heal_tests_mutants_after_the_rewrite_fails_and_applies_the_one_that_passes(project):
    # The model writes the same wrong rewrite every time; one token (`+ 1` as `+ 0`) fixes it.
    code, events, source = heal(project, [[LOCATED]] + [[WRONG]] * 3, rounds=1, n=1, mutants=True)
    assert code == 0
    assert "return sum(xs) / (len(xs) + 0)" in (project / "stats.py").read_text()
    rounds = items(events, "heal")
    assert rounds[-1]["method"] == "mutants" and rounds[-1]["passed"] == 1
    assert len(source.draws) == 2  # the localization and one rewrite: the mutants asked no model


def test_with_mutants_off_no_mutant_is_tested(project):
    code, events, _ = heal(project, [[LOCATED]] + [[WRONG]] * 3, rounds=1, n=1, mutants=False)
    assert code == 1 and (project / "stats.py").read_text() == STATS
    assert all(r["method"] != "mutants" for r in items(events, "heal"))


def test_the_lines_a_failing_call_ran_come_first_whatever_their_kind():
    source = "def pick(xs, n):\n    if n > 3:\n        return xs[0]\n    return xs[n - 1]\n"
    ordered = [m.line for m in mutants(source)]
    assert ordered[0] == 2  # comparisons first, with no trace
    ran_first = mutants(source, first={2, 4})
    lines = [m.line for m in ran_first]
    assert 3 in lines and lines == sorted(lines, key=lambda line: line not in {2, 4})  # ran lines first
    assert sorted(m.said for m in ran_first) == sorted(m.said for m in mutants(source))  # the same ones


def test_splits_keys_methods_and_variables_are_mutated_as_such():
    source = (
        "def pair(text, index=0):\n"
        "    key, value = text.split('=')\n"
        "    row = {'k': key}\n"
        "    found = row.get('v', row['k'])\n"
        "    return key.upper(), index, value.find(':'), found\n"
    )
    made = {m.said: m.source for m in mutants(source, limit=500)}
    assert "text.split('=', 1)" in made["line 2: split once"]
    assert "text.rsplit('=')" in made["line 2: split for rsplit"]
    assert "row.get('k', row['k'])" in made["line 4: 'v' for 'k'"]  # a key the function reads elsewhere
    assert "row.get('v', row['v'])" in made["line 4: 'k' for 'v'"]
    assert "key.lower()" in made["line 5: upper for lower"]
    assert "value.rfind(':')" in made["line 5: find for rfind"]
    assert "return value.upper()" in made["line 5: key for value"]  # a wrong variable
    # A variable is swapped only for one that has a value there; a name that is no method keeps.
    assert "line 2: text for found" not in made and "line 5: index for rindex" not in made


def test_the_heal_traces_the_failing_call_once_to_order_its_mutants(project, tmp_path):
    code, events, _ = heal(project, [[LOCATED]] + [[WRONG]] * 3, rounds=1, n=1, mutants=True)
    assert code == 0
    (trace,) = items(events, "trace")  # traced once, for the mutants
    assert (trace["call"], trace["ended"]) == ("mean([1, 2, 3])", "returns 1.5")
    (tmp_path / "off").mkdir()
    again = stats_project(tmp_path / "off")
    code, events, _ = heal(again, [[LOCATED]] + [[WRONG]] * 3, rounds=1, n=1, mutants=True, trace=False)
    assert code == 0 and items(events, "heal")[-1]["method"] == "mutants"
    assert not items(events, "trace")


def test_the_mutants_round_ends_at_its_own_time_limit_and_the_heal_goes_on(project, monkeypatch):
    # Some dozens of test runs took half a heal's budget on bugs no one token mends: the round
    # stops at its limit between runs, and what comes after it keeps its time.
    monkeypatch.setattr(healing, "MUTANTS_S", 0.01)
    two_off = STATS.replace("(len(xs) + 1)", "(len(xs) + 2)")  # no one token mends it
    (project / "stats.py").write_text(two_off)
    code, events, _ = heal(project, [[LOCATED]] + [[WRONG]] * 3, rounds=2, n=1, mutants=True)
    (mutated,) = [r for r in items(events, "heal") if r.get("method") == "mutants"]
    assert mutated["passed"] == 0 and mutated["cancelled"] >= mutated["n"] - 2  # two runs at once
    assert "out_of_time" not in mutated
    assert items(events, "heal")[-1].get("method") != "mutants"  # a round after it still ran
