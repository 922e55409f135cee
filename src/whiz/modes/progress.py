"""How far a failing run got through the tests.

Two runs that both fail are not equally wrong: one that passes more tests, or that fails at a
later line of the same test (its earlier assertions held), got further. A repair builds on the
rewrite that got furthest (`repair.Base`): shown a version that is already right up to a point,
a small model mends what is left, where shown the code as it was it mends one thing and breaks
another.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from whiz.agent.context.test_feedback import count_passed

_PYTEST_AT = re.compile(r"^(\S+?\.py):(\d+): \S")
"""A frame's place in pytest's report: `test_x.py:12: in check`, or `test_x.py:9: AssertionError`."""
_TRACEBACK_AT = re.compile(r'^\s*File "([^"]+\.py)", line (\d+), in ')


@dataclass(frozen=True)
class Reached:
    """Where a failing run stopped: tests passed, and the test file and line of the first failure's
    last frame in a test file; `where` is "" when no test file's frame is named (the code did not
    import, or the runner said nothing of where)."""

    passed: int
    where: str = ""
    line: int = 0

    def further_than(self, other: Reached) -> bool:
        """More tests passed, or as many and a failure at a later line of the same test file."""
        if self.passed != other.passed:
            return self.passed > other.passed
        return bool(self.where) and self.where == other.where and self.line > other.line


def reached(output: str, summary: str, is_test: Callable[[str], bool], root: str = "") -> Reached:
    """Where the run whose full `output` and `failure_summary` are given stopped: the frames of the
    summary's first failing test (pytest's report), else of the output's first traceback (a
    script's, unittest's), whose summary keeps one frame only. `is_test` says whether a
    workspace-relative path is a test file; `root`, the workspace's folder, makes absolute paths
    relative."""
    frames = [m for line in summary.split("\n\n", 1)[0].splitlines() if (m := _PYTEST_AT.match(line.strip()))]
    if not frames:
        lines = output.splitlines()
        start = next(
            (i for i, x in enumerate(lines) if x.startswith("Traceback (most recent call last)")), None
        )
        if start is not None:
            end = next(
                (i for i in range(start + 1, len(lines)) if not lines[i].startswith((" ", "\t"))), len(lines)
            )
            frames = [m for x in lines[start + 1 : end] if (m := _TRACEBACK_AT.match(x))]
    passed = count_passed(output) or 0
    prefix = root.rstrip("/") + "/" if root else ""
    for found in reversed(frames):
        path = found.group(1)
        if prefix and path.startswith(prefix):
            path = path[len(prefix) :]
        if not PurePosixPath(path).is_absolute() and is_test(path):
            return Reached(passed, path, int(found.group(2)))
    return Reached(passed)
