"""The failing call traced line by line: taken from what the checks said, run in a copy of the
workspace, and shown to a heal's later rewrites, not its first."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.modes.test_repair import LOCATED, TASK, TEST_CMD, WRONG, items, stats_project
from whiz.agent.project.workspace import Workspace
from whiz.environments import SandboxOptions
from whiz.modes.candidates import ScriptedCandidates
from whiz.modes.healing import Healer, HealSettings
from whiz.modes.localize import functions_in
from whiz.modes.notices import ItemEmitter, describe
from whiz.modes.pool import Label
from whiz.modes.trace import failing_call, interpreter, shown_trace, traced

LOOPS = """def to_snake(name):
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i > 0 and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def spins(n):
    while n > 0:
        n = n + 1
    return n


class Box:
    def size(self, extra):
        return extra
"""


@pytest.fixture
def loops(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "names.py").write_text(LOOPS)
    return root


def function(root: Path, name: str, path: str = "names.py"):
    (fn,) = [f for f in functions_in(path, (root / path).read_text()) if f.name == name]
    return fn


def test_the_call_is_the_first_with_literal_arguments_in_what_the_checks_said(loops):
    fn = function(loops, "to_snake")
    pytest_said = (
        ">       assert to_snake(word) == want\n"  # a name, not a literal: not rerun
        '>       assert to_snake("HTTPServer") == "http_server"\n'
        "E       AssertionError: assert 'httpserver' == 'http_server'\n"
    )
    assert failing_call(pytest_said, fn) == "to_snake('HTTPServer')"
    doctest_said = "Failed example:\n    to_snake('parseJson', )\nExpected:\n    'parse_json'\n"
    assert failing_call(doctest_said, fn) == "to_snake('parseJson')"
    assert failing_call("assert my_to_snake('a') == 'a'\nassert x.to_snake('a')", fn) is None
    assert failing_call("assert to_snake(open('/etc/passwd').read())", fn) is None
    assert failing_call("assert to_snake(*names)", fn) is None
    # A method needs an instance the output does not give.
    assert failing_call("assert size(3) == 4", function(loops, "size")) is None


def test_the_interpreter_is_the_one_the_tests_name():
    assert interpreter("/opt/venv/bin/python3.11 -m pytest -q") == "/opt/venv/bin/python3.11"
    assert interpreter("pytest -q tests") == "python3"
    assert interpreter("sh -c 'unbalanced") == "python3"


def run_trace(root: Path, name: str, call: str):
    fn = function(root, name)
    found = asyncio.run(traced(root, SandboxOptions(), fn, call, TEST_CMD))
    assert found is not None
    return fn, found


def test_a_trace_shows_each_line_run_with_the_values_it_set_and_what_the_call_returned(loops):
    fn, found = run_trace(loops, "to_snake", "to_snake('aB')")
    said = shown_trace(found, fn)
    assert "What `to_snake('aB')` does now, line by line" in said
    assert "   3 | for i, ch in enumerate(name):   -> i=1  ch='B'" in said
    assert "   5 | out.append(\"_\")   -> out=['a', '_']" in said
    assert said.rstrip("`\n").endswith("The call returns 'a_b'")
    assert found.steps == len(found.head) + len(found.tail)
    assert found.ran == {2, 3, 4, 5, 6, 7}
    _, skipped = run_trace(loops, "to_snake", "to_snake('ab')")
    assert 5 not in skipped.ran  # no capital: the underscore's line never runs


def test_a_call_that_never_ends_is_stopped_and_shown_short(loops):
    fn, found = run_trace(loops, "spins", "spins(1)")
    said = shown_trace(found, fn)
    assert "it does not end" in said
    assert "more lines ..." in said  # the first lines and the last few, not thousands
    assert len(said.splitlines()) < 30


def test_a_call_that_raises_says_so(loops):
    fn, found = run_trace(loops, "to_snake", "to_snake(None)")
    assert found.ended == "raises TypeError: 'NoneType' object is not iterable"


def test_a_long_raised_message_is_cut_in_its_own_words_with_an_ellipsis(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "picky.py").write_text(
        "def picky(word):\n    raise ValueError(f'{word!r} is not one of ' + 'abc, ' * 20)\n"
    )
    fn = function(root, "picky", "picky.py")
    found = asyncio.run(traced(root, SandboxOptions(), fn, "picky('z')", TEST_CMD))
    assert found is not None
    assert found.ended.startswith("raises ValueError: 'z' is not one of abc, abc")
    assert found.ended.endswith("abc,...")  # three dots, no stray quote


@dataclass
class Models:
    source: ScriptedCandidates
    current: Label = Label.DEEP

    async def candidates(self, label: Label | None = None) -> ScriptedCandidates:
        return self.source

    def escalate(self, reason: str, trigger: str) -> bool:
        return False


def repair_stage(project: Path, number: int, trace: bool = True):
    """One repair stage of the mean bug, as the heal's `number`th round: the localization, then a
    wrong rewrite; what the rewrite was asked, and the items."""
    failure = subprocess.run(TEST_CMD, shell=True, cwd=project, capture_output=True, text=True).stderr
    source = ScriptedCandidates([[LOCATED], [WRONG]])
    events: list[dict] = []
    settings = HealSettings(n=1, test_timeout_s=20, mutants=False, trace=trace)
    healer = Healer(Workspace(project), TEST_CMD, settings, emit=ItemEmitter(events.append))
    asyncio.run(healer.repair(Models(source), TASK, failure, n=1, number=number))
    return source.calls[1][-1]["content"], events


def test_a_later_repair_stage_is_shown_the_failing_call_traced_and_the_first_is_not(tmp_path):
    project = stats_project(tmp_path)
    asked, events = repair_stage(project, number=2)
    assert "What `mean([1, 2, 3])` does now, line by line" in asked
    assert "return sum(xs) / (len(xs) + 1)" in asked.split("line by line", 1)[1]
    assert "The call returns 1.5" in asked
    (item,) = items(events, "trace")
    assert (item["function"], item["call"], item["ended"]) == ("mean", "mean([1, 2, 3])", "returns 1.5")
    assert describe(item) == "trace: mean([1, 2, 3]) returns 1.5 (1 line run)"

    (tmp_path / "again").mkdir()
    first, events = repair_stage(stats_project(tmp_path / "again"), number=1)
    assert "line by line" not in first and not items(events, "trace")
    (tmp_path / "off").mkdir()
    off, events = repair_stage(stats_project(tmp_path / "off"), number=2, trace=False)
    assert "line by line" not in off and not items(events, "trace")


def test_the_tracers_own_folder_does_not_stand_for_the_users_modules(tmp_path):
    # The tracer runs by its path, from whiz's own package folder, where `trace.py` and `pool.py`
    # lie beside it: the user's `import trace` is the standard library's, `import pool` theirs.
    root = tmp_path / "ws"
    root.mkdir()
    (root / "pool.py").write_text("SIZE = 3\n")
    (root / "jobs.py").write_text(
        "import trace\nimport pool\n\n\n"
        "def size():\n    return pool.SIZE + hasattr(trace, 'CoverageResults')\n"
    )
    fn = function(root, "size", "jobs.py")
    found = asyncio.run(traced(root, SandboxOptions(), fn, "size()", TEST_CMD))
    assert found is not None and found.ended == "returns 4"
