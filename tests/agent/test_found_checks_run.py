"""The runner of the checks found in the code: each check's verdict on the code as it is now, from
the checks as they were found (a rewrite that changes its docstring's examples is still held to
the user's), one JSON line of verdicts, and exit 0 only when all pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from whiz.agent import found_checks_run
from whiz.agent.context.test_feedback import count_passed
from whiz.agent.found_checks_run import command, shown, verdicts
from whiz.agent.project.found_checks import find_checks
from whiz.agent.project.workspace import Workspace

from .project.found_fixtures import CLAMP_FIXED, DOCTESTS, EXAMPLES, MAIN_BLOCK, REPO_TESTS, write


def run_found(root: Path, task: str) -> tuple[int, str, dict[str, str] | None]:
    found = find_checks(Workspace(root), task)
    done = subprocess.run(
        command(found.spec()), shell=True, cwd=root, capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, verdicts(done.stdout)


def test_doctests_fail_on_the_bug_and_pass_on_the_fix_as_they_were_found(tmp_path):
    root = write(tmp_path, DOCTESTS)
    found = find_checks(Workspace(root), "Fix clamp in solution.py")
    cmd = command(found.spec())
    failed = subprocess.run(cmd, shell=True, cwd=root, capture_output=True, text=True)
    assert failed.returncode == 1
    assert "FAIL solution.py:4" in failed.stdout and "clamp(-1, 0, 3)" in failed.stdout
    # A heal ranks failures by the examples passed: one of the docstring's two.
    assert count_passed(failed.stdout) == 1
    # The fix, with its docstring's examples rewritten to the bug's answers: held to the user's.
    (root / "solution.py").write_text(CLAMP_FIXED.replace('    0\n    """', '    3\n    """'))
    passed = subprocess.run(cmd, shell=True, cwd=root, capture_output=True, text=True)
    assert passed.returncode == 0, passed.stdout
    assert verdicts(passed.stdout) == {"solution.py:4": "pass"}
    assert not (root / "__pycache__").exists()  # nothing left in the user's folder


def test_example_lines_say_what_came_back(tmp_path):
    code, out, results = run_found(write(tmp_path, EXAMPLES), "Fix last_word_length in solution.py")
    assert code == 1
    assert results == {"solution.py:4": "pass", "solution.py:5": "fail", "solution.py:6": "pass"}
    assert "returned 0, expected 2" in out


def test_a_main_blocks_asserts_run_with_the_modules_names(tmp_path):
    code, out, results = run_found(write(tmp_path, MAIN_BLOCK), "Fix mean in stats.py")
    assert code == 1 and results == {"stats.py:5": "fail"}
    assert "the assert at stats.py:6 failed" in out


def test_the_repositorys_tests_of_the_function_run_by_node_id(tmp_path):
    code, out, results = run_found(write(tmp_path, REPO_TESTS), "Fix rect_area")
    assert code == 1
    assert results == {
        "tests/test_area.py::test_square": "pass",
        "tests/test_area.py::test_rect": "fail",
        "tests/test_area.py::TestArea::test_zero": "fail",
    }


def test_a_module_whose_import_fails_is_an_error_and_code_that_does_not_parse_a_failure(tmp_path):
    root = write(tmp_path, DOCTESTS)
    spec = find_checks(Workspace(root), "Fix clamp").spec()
    (root / "solution.py").write_text("import not_installed_here\n" + DOCTESTS["solution.py"])
    done = subprocess.run(command(spec), shell=True, cwd=root, capture_output=True, text=True)
    assert done.returncode == 1 and verdicts(done.stdout) == {"solution.py:4": "error"}
    assert "did not import: ModuleNotFoundError" in done.stdout
    (root / "solution.py").write_text("def clamp(:\n")  # a bug too: a fix makes it parse
    done = subprocess.run(command(spec), shell=True, cwd=root, capture_output=True, text=True)
    assert verdicts(done.stdout) == {"solution.py:4": "fail"} and "does not parse: SyntaxError" in done.stdout


def test_a_rewrite_that_loops_forever_fails_its_check_at_the_limit(tmp_path, monkeypatch, capsys):
    root = write(tmp_path, DOCTESTS)
    spec = find_checks(Workspace(root), "Fix clamp").spec()
    (root / "solution.py").write_text("def clamp(x, lo, hi):\n    while True:\n        pass\n")
    monkeypatch.setattr(found_checks_run, "CHECK_TIMEOUT_S", 1)
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert found_checks_run.run(spec) == {"solution.py:4": "fail"}
    assert "did not return within 1 s" in capsys.readouterr().out
    sys.modules.pop("solution", None)


def test_the_model_reads_what_the_checks_are_not_the_command(tmp_path):
    root = write(tmp_path, EXAMPLES)
    cmd = command(find_checks(Workspace(root), "Fix last_word_length").spec())
    assert shown(cmd) == "the checks already in the code (3 docstring examples of last_word_length)"
    assert shown("pytest -q") is None


def test_the_runners_own_folder_does_not_stand_for_the_users_modules(tmp_path):
    # The runner runs by its path, from whiz's agent folder, where `config.py` and `tools.py` lie
    # beside it: the user's `import config` is the one on their own Python path.
    lib, root = tmp_path / "lib", tmp_path / "ws"
    lib.mkdir()
    root.mkdir()
    (lib / "config.py").write_text("NAME = 'theirs'\n")
    (root / "solution.py").write_text(
        'import config\n\n\ndef name():\n    """The configured name.\n\n'
        '    >>> name()\n    \'theirs\'\n    """\n    return config.NAME\n'
    )
    found = find_checks(Workspace(root), "Fix name in solution.py")
    env = {**os.environ, "PYTHONPATH": str(lib)}
    done = subprocess.run(
        command(found.spec()), shell=True, cwd=root, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout
    assert verdicts(done.stdout) == {"solution.py:7": "pass"}
