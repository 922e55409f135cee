"""A repair reads the failing test's code: every case it checks, not only the first that broke."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from whiz.agent.context.test_feedback import failure_summary
from whiz.agent.project.test_files import TestFiles
from whiz.agent.project.workspace import Workspace
from whiz.modes.failing_tests import MARK, MAX_CHARS, MAX_TEST_LINES, failing_tests

LABELS = "def labels(n):\n    return [str(i) for i in range(n)]\n"
TEST_LABELS = """from labels import labels


def check():
    assert labels(0) == []
    assert labels(2) == ["0", "1"]
    assert labels(11)[0] == "00"
    assert labels(11)[10] == "10"


def test_labels():
    check()
"""
PYTEST = [sys.executable, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider", "-p", "no:asyncio"]


def run(root: Path, cmd: list[str]) -> str:
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, done.stdout
    return failure_summary(done.stdout + done.stderr, str(root))


def project(tmp_path: Path, test: str = TEST_LABELS, name: str = "test_labels.py") -> Path:
    (tmp_path / "labels.py").write_text(LABELS)
    (tmp_path / name).write_text(test)
    return tmp_path


def test_the_whole_failing_test_is_shown_with_the_failing_line_marked(tmp_path):
    root = project(tmp_path)
    summary = run(root, [*PYTEST, "test_labels.py"])
    assert 'labels(11)[10] == "10"' not in summary  # the run stopped at the first case that broke
    shown = failing_tests(Workspace(root), summary, TestFiles("pytest test_labels.py"))
    # Every case the code must meet, the one that broke marked, and the test that called it.
    for case in ("labels(0) == []", 'labels(2) == ["0", "1"]', 'labels(11)[10] == "10"'):
        assert case in shown
    assert f'    assert labels(11)[0] == "00"{MARK}' in shown
    assert shown.count(MARK) == 2 and "def test_labels():" in shown
    assert shown.index("def check():") < shown.index("def test_labels():")  # where it broke first
    assert "range(n)" not in shown  # the code under repair is the rewrite's own business


def test_a_scripts_own_asserts_are_shown_around_the_line_that_failed(tmp_path):
    script = "from labels import labels\n\nprint('checking')\n"
    script += "assert labels(1) == ['0']\nassert labels(3) == ['00']\n"
    root = project(tmp_path, script, "check.py")
    summary = run(root, [sys.executable, "check.py"])
    shown = failing_tests(Workspace(root), summary, TestFiles(f"{sys.executable} check.py"))
    assert "check.py, lines 1-5" in shown and f"assert labels(3) == ['00']{MARK}" in shown


def test_only_test_files_are_shown(tmp_path):
    root = project(tmp_path)
    # The run breaks inside the code under repair: its frame there is not a test's.
    (root / "labels.py").write_text("def labels(n):\n    raise ValueError(n)\n")
    summary = run(root, [*PYTEST, "test_labels.py"])
    assert "labels.py:2" in summary
    shown = failing_tests(Workspace(root), summary, TestFiles("pytest test_labels.py"))
    assert "raise ValueError" not in shown and f"assert labels(0) == []{MARK}" in shown
    # Nor is a file the output names outside the workspace, or one that is not there.
    outside = 'File "/usr/lib/python3/json/decoder.py", line 3, in decode\nmissing_test.py:2: in t\n'
    assert failing_tests(Workspace(root), outside, TestFiles("pytest")) == ""


def test_a_long_test_is_shown_around_its_failing_line_and_all_within_the_budget(tmp_path):
    cases = "".join(f"    assert labels({i}) == labels({i})\n" for i in range(200))
    test = f"from labels import labels\n\n\ndef test_many():\n{cases}    assert labels(2) == []\n"
    root = project(tmp_path, test)
    summary = run(root, [*PYTEST, "test_labels.py"])
    shown = failing_tests(Workspace(root), summary, TestFiles("pytest test_labels.py"))
    assert f"assert labels(2) == []{MARK}" in shown
    assert shown.count("\n    assert") <= MAX_TEST_LINES and len(shown) <= MAX_CHARS
