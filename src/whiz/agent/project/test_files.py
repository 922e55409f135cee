"""Which files are the tests: healing judges candidates by them, so a candidate may not change them.

A small model asked to make a failing test pass will sometimes rewrite the test instead (seen:
an assertion it could not satisfy replaced by one it could). Healing would then report a pass
and apply a change that fixes nothing. The tests are the specification here, so an edit to them
is rejected unless the user allows it (`whiz heal --allow-test-edits`).

A file counts as a test when the test command names it (or a folder holding it), or when its
name follows a test convention of a common language.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath

_TEST_NAME = re.compile(
    r"""(
        ^test_.+\.py$ | ^.+_test\.py$ | ^conftest\.py$    # pytest, unittest
        | ^.+_test\.go$                                  # go test
        | ^.+\.(test|spec)\.[cm]?[jt]sx?$                 # jest, vitest, mocha
        | ^.+_spec\.rb$ | ^.+_test\.rb$                   # rspec, minitest
        | ^.+Tests?\.(java|kt|cs)$                       # JUnit, xUnit
    )""",
    re.VERBOSE,
)
_TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "testing"})


class TestFiles:
    """The test files of one workspace for one test command."""

    __test__ = False  # not a pytest class, despite its name

    def __init__(self, test_cmd: str, *, named: set[str] | None = None):
        self.named = named if named is not None else named_paths(test_cmd)

    def __contains__(self, path: str) -> bool:
        """True when `path` (workspace-relative, with /) is a test file."""
        parts = PurePosixPath(path).parts
        if not parts:
            return False
        if path in self.named or any(path.startswith(folder.rstrip("/") + "/") for folder in self.named):
            return True
        return bool(_TEST_NAME.match(parts[-1])) or any(p in _TEST_DIRS for p in parts[:-1])


def named_paths(test_cmd: str) -> set[str]:
    """The relative paths the test command mentions (`pytest tests/unit test_x.py::test_y`), with
    pytest's `::node` suffix cut; the workspace root itself (`.`) is not one."""
    try:
        words = shlex.split(test_cmd)
    except ValueError:
        words = test_cmd.split()
    paths = set()
    for word in words:
        word = word.split("::", 1)[0]
        if word.startswith("-") or "=" in word or word.startswith("/") or not word:
            continue
        clean = str(PurePosixPath(word))
        if clean in (".", "..") or clean.startswith("../"):
            continue
        if "/" in word or "." in clean:
            paths.add(clean)
    return paths
