"""Finding the checks a user already wrote for the function a task names: doctests, docstring
example lines, a `__main__` block's asserts, the repository's tests that call it."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.project.found_checks import example_line, find_checks
from whiz.agent.project.workspace import Workspace

from .found_fixtures import DOCTESTS, EXAMPLES, MAIN_BLOCK, NO_CHECKS, REPO_TESTS, write


def found(tmp_path: Path, files: dict[str, str], task: str):
    return find_checks(Workspace(write(tmp_path, files)), task)


def test_a_docstring_with_doctests_is_one_check_of_the_named_function(tmp_path):
    checks = found(tmp_path, DOCTESTS, "Fix the bug in the function clamp in solution.py")
    assert [(t.path, t.name) for t in checks.targets] == [("solution.py", "clamp")]
    assert [(c.kind, c.where) for c in checks.checks] == [("doctest", "solution.py:4")]
    assert checks.label() == "1 docstring with doctests of clamp"


def test_example_lines_are_one_check_each_with_their_line(tmp_path):
    checks = found(tmp_path, EXAMPLES, "Fix the bug in the function last_word_length in solution.py")
    assert [(c.kind, c.where, c.text) for c in checks.checks] == [
        ("example", "solution.py:4", 'last_word_length("hello world") == 5'),
        ("example", "solution.py:5", 'last_word_length("fly me   ") == 2'),
        ("example", "solution.py:6", 'last_word_length("") == 0'),
    ]


def test_a_main_block_that_asserts_the_function_is_a_check(tmp_path):
    checks = found(tmp_path, MAIN_BLOCK, "mean in stats.py is wrong, fix it")
    assert [(c.kind, c.where) for c in checks.checks] == [("main", "stats.py:5")]
    assert checks.checks[0].data["source"].startswith("assert mean([2, 4]) == 3\n")


def test_the_repository_tests_that_call_the_function_are_found_by_node_id(tmp_path):
    checks = found(tmp_path, REPO_TESTS, "Fix rect_area")
    assert [c.where for c in checks.checks] == [
        "tests/test_area.py::test_square",
        "tests/test_area.py::test_rect",
        "tests/test_area.py::TestArea::test_zero",
    ]


def test_a_task_that_names_no_function_of_the_workspace_finds_nothing(tmp_path):
    assert not found(tmp_path, REPO_TESTS, "Make the code faster")
    assert not found(tmp_path, NO_CHECKS, "Fix the bug in double in solution.py")  # it has none


def test_a_task_that_names_only_a_file_is_about_its_functions(tmp_path):
    checks = found(tmp_path, DOCTESTS, "There is a bug in solution.py")
    assert [t.name for t in checks.targets] == ["clamp"]


def test_example_lines_must_be_calls_of_the_function_with_python_on_both_sides():
    assert example_line("f(2) == 4", "f") == ("f(2)", "4")
    assert example_line("f([1, 2]) returns 3.", "f") == ("f([1, 2])", "3")
    for arrow in ("==>", "➞", "=", "=>", "should return"):
        assert example_line(f"f(g(1), 'a') {arrow} 'NO'", "f") == ("f(g(1), 'a')", "'NO'")
    assert example_line("f(x) returns the sum of x", "f") is None  # prose, not a value
    assert example_line("g(2) == 4", "f") is None
