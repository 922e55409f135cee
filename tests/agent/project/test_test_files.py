"""Which files healing treats as the tests that decide."""

from __future__ import annotations

import pytest

from whiz.agent.project.test_files import TestFiles, named_paths


@pytest.mark.parametrize(
    "path",
    ["test_calc.py", "pkg/calc_test.py", "conftest.py", "tests/helpers.py", "src/__tests__/x.js",
     "server/handler_test.go", "ui/button.test.tsx", "lib/parser.spec.js", "spec/models/user_spec.rb",
     "src/test/java/CalcTest.java"],
)  # fmt: skip
def test_conventional_test_files_are_tests(path):
    assert path in TestFiles("make check")


@pytest.mark.parametrize("path", ["calc.py", "latest.py", "src/contest.py", "attest.go", "testdata.json"])
def test_code_files_are_not(path):
    assert path not in TestFiles("make check")


def test_the_files_and_folders_the_test_command_names_are_tests():
    tests = TestFiles("python -m pytest -q checks/ smoke.py::test_it --maxfail=1")
    assert "checks/a.py" in tests and "smoke.py" in tests
    assert "calc.py" not in tests


def test_the_root_and_flags_are_not_named_paths():
    assert named_paths("python -m pytest -q . -k 'not slow'") == set()
    assert named_paths("/usr/bin/python3 verify.py") == {"verify.py"}
    assert named_paths("sh -c 'unbalanced") == set()
