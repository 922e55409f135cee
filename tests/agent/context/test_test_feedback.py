"""What a failing test run said, trimmed: on real pytest, unittest and traceback outputs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from whiz.agent.context.test_feedback import count_passed, failure_summary, headline

STATS = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n"
HELPER = "def value_of(x):\n    return x.value\n"
# A plugin's deprecation warning on every run, as pytest-asyncio printed before each candidate's output.
CONFTEST = """import warnings

# At import, as a plugin's deprecation does: every pytest version shows it in its warnings summary.
warnings.warn(DeprecationWarning("The configuration option 'loop_scope' is unset. Set it."))
"""
PYTEST_TESTS = """from helper import value_of
from stats import mean


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_value():
    assert value_of(3) == 3


def test_fine():
    assert True
"""
UNITTEST_TESTS = """import unittest

from stats import mean


class MeanTest(unittest.TestCase):
    def test_three(self):
        self.assertEqual(mean([1, 2, 3]), 2)

    def test_one(self):
        self.assertEqual(mean([4]), 4)

    def test_empty_is_fine(self):
        self.assertTrue(True)


if __name__ == "__main__":
    unittest.main()
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "stats.py").write_text(STATS)
    (tmp_path / "helper.py").write_text(HELPER)
    return tmp_path


def run(root: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    return done.stdout + done.stderr


def test_pytest_output_keeps_the_assertion_with_its_values_and_drops_the_warnings(project):
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_stats.py").write_text(PYTEST_TESTS)
    output = run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert "DeprecationWarning" in output  # the run really opened with the warning
    summary = failure_summary(output, str(project))
    assert "Warning" not in summary and "loop_scope" not in summary
    assert "assert mean([1, 2, 3]) == 2" in summary
    assert "assert 1.5 == 2" in summary  # the values compared
    # The second failure ends in helper.py: its last frame there, with the error.
    assert "return x.value" in summary and "AttributeError" in summary
    assert "helper.py:2: AttributeError" in summary
    assert "2 failed, 1 passed" in summary
    assert len(summary) < len(output) / 2
    assert count_passed(output) == 1
    assert headline(summary).startswith("assert 1.5 == 2")


def test_pytests_short_traceback_keeps_the_line_that_failed(project):
    # `--tb=short` marks no line with `>`: the line under each place is the one that ran, and
    # without it the values compared say nothing of the call that gave them.
    (project / "test_stats.py").write_text(PYTEST_TESTS)
    output = run(
        project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", "test_stats.py::test_mean"
    )
    summary = failure_summary(output, str(project))
    assert "test_stats.py:6: in test_mean\n    assert mean([1, 2, 3]) == 2\nE   assert 1.5 == 2" in summary


def test_unittest_output_keeps_each_failure_its_frame_and_the_count(project):
    (project / "test_mean.py").write_text(UNITTEST_TESTS)
    output = run(project, "-m", "unittest", "test_mean")
    summary = failure_summary(output, str(project))
    assert "FAIL: test_three" in summary and "FAIL: test_one" in summary
    assert "self.assertEqual(mean([1, 2, 3]), 2)" in summary
    assert "AssertionError: 1.5 != 2" in summary and "AssertionError: 2.0 != 4" in summary
    assert "Ran 3 tests" in summary and "FAILED (failures=2)" in summary
    assert count_passed(output) == 1


def test_a_bare_traceback_keeps_the_last_frame_in_the_workspace_not_the_librarys(project):
    (project / "main.py").write_text("import json\n\nprint('parsing the config')\njson.loads('{')\n")
    output = run(project, "main.py")
    summary = failure_summary(output, str(project))
    assert 'main.py", line 4' in summary and "json.loads('{')" in summary
    assert summary.startswith("parsing the config")  # what it printed just before
    assert "json/decoder.py" not in summary  # the standard library's frames stay out
    assert summary.splitlines()[-1].startswith("json.decoder.JSONDecodeError")
    assert count_passed(output) is None


def test_other_output_keeps_its_tail_without_warnings():
    output = "\n".join(
        [
            "/x/plugin.py:306: PytestDeprecationWarning: option unset.",
            "The event loop scope will change.",
            "",
            "  warnings.warn(PytestDeprecationWarning(UNSET))",
            *[f"line {i}" for i in range(500)],
            "mean([4]) returned 2.0, expected 4",
        ]
    )
    summary = failure_summary(output, max_chars=200)
    assert summary.endswith("mean([4]) returned 2.0, expected 4")
    assert "Warning" not in summary and len(summary) <= 220
    assert "line 0\n" not in summary


def test_the_same_failure_reads_the_same_in_every_run(project):
    # An address in a repr and the run's duration change from run to run; the next candidate's
    # request holds the summary, so a seeded heal drew different candidates for the same code.
    (project / "test_mean.py").write_text(UNITTEST_TESTS)
    (project / "test_where.py").write_text(
        "import stats\n\n\ndef test_where():\n    assert stats.mean is None\n"
    )
    pytest_run = run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_where.py")
    unittest_run = run(project, "-m", "unittest", "test_mean")
    for output in (pytest_run, unittest_run):
        summary = failure_summary(output, str(project))
        assert re.search(r" in [\d.]+s\b", output) and not re.search(r" in [\d.]+s\b", summary), summary
        assert not re.search(r" at 0x[0-9a-f]+>", summary), summary
    assert re.search(r"<function mean at 0x[0-9a-f]+> is None", pytest_run)
    summary = failure_summary(pytest_run, str(project))
    assert "assert <function mean> is None" in summary and summary.endswith("1 failed")
    assert failure_summary(unittest_run, str(project)).endswith("Ran 3 tests FAILED (failures=2)")
