"""How far a failing run got: more tests passed, or a later line of the same test file."""

from __future__ import annotations

from whiz.agent.context.test_feedback import failure_summary
from whiz.agent.project.test_files import TestFiles
from whiz.modes.progress import Reached, reached

TESTS = TestFiles("python -m pytest -q test_calc.py")


def pytest_run(line: int, passed: int = 0) -> str:
    counts = f"1 failed, {passed} passed in 0.03s" if passed else "1 failed in 0.03s"
    return (
        "F"
        + "." * passed
        + "\n=================================== FAILURES ===================================\n"
        "__________________________________ test_check __________________________________\n"
        "test_calc.py:20: in test_check\n    check()\n"
        f"test_calc.py:{line}: in check\n    assert total([1, 2]) == 3\n"
        "E   assert 4 == 3\n"
        f"=========================== short test summary info ============================\n{counts}\n"
    )


def at(output: str, tests=TESTS, root: str = "/ws") -> Reached:
    return reached(output, failure_summary(output, root), tests.__contains__, root)


def test_a_failure_at_a_later_line_of_the_same_test_got_further():
    early, late = at(pytest_run(9)), at(pytest_run(12))
    assert (late.where, late.line) == ("test_calc.py", 12)
    assert late.further_than(early) and not early.further_than(late)
    assert not late.further_than(at(pytest_run(12)))  # the same place is no progress


def test_more_tests_passed_is_further_wherever_the_failure_is():
    assert at(pytest_run(9, passed=3)).further_than(at(pytest_run(30, passed=2)))


def test_a_scripts_traceback_is_read_through_its_frames_in_the_test_file():
    # A script's summary keeps one frame (the code's): its place in the test file comes from the
    # whole traceback, with the workspace's folder taken off the paths.
    def script(line: int) -> str:
        return (
            "Traceback (most recent call last):\n"
            f'  File "/ws/check.py", line {line}, in <module>\n    assert mean([]) == 0\n'
            '  File "/ws/stats.py", line 3, in mean\n    return sum(xs) / len(xs)\n'
            "ZeroDivisionError: division by zero\n"
        )

    tests = TestFiles("python check.py")
    early, late = at(script(2), tests), at(script(4), tests)
    assert (late.where, late.line) == ("check.py", 4)
    assert late.further_than(early)


def test_code_that_does_not_import_got_nowhere():
    output = (
        "Traceback (most recent call last):\n"
        '  File "/ws/stats.py", line 3\n    return sum(xs) /\n'
        "SyntaxError: invalid syntax\n"
    )
    nowhere = at(output, TestFiles("python check.py"))
    assert nowhere == Reached(0)
    assert not nowhere.further_than(Reached(0)) and not Reached(0, "check.py", 2).further_than(nowhere)
