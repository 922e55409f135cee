"""The task's examples against a new module: each line on its own, and what the call gave instead."""

from __future__ import annotations

import subprocess
from pathlib import Path

from whiz.agent.examples_check import examples_command

APP = (
    "print('imported')\n"
    "def handle(path):\n"
    "    if path == '/':\n"
    "        return (200, 'hello')\n"
    "    a, b = path.split('=')[1].split('&')\n"  # the 1.5B's parse: '2&b' and '3'
    "    return (200, str(int(a) + int(b)))\n"
    "def spin():\n"
    "    while True:\n"
    "        pass\n"
)


def check(tmp_path: Path, lines: list[str], module: str = "app") -> subprocess.CompletedProcess:
    (tmp_path / "app.py").write_text(APP)
    command = examples_command(module, lines)
    return subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=30)


def test_every_example_is_tried_and_a_failing_one_says_what_the_call_did(tmp_path: Path):
    done = check(
        tmp_path,
        [
            "assert handle('/add?a=2&b=3') == (200, '5')",
            "assert app.handle('/') == (200, 'hello')",
            "assert handle('/') is None",
        ],
    )
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith("FAILED: handle('/add?a=2&b=3') == (200, '5'): it raised ValueError")
    assert lines[1] == "held: app.handle('/') == (200, 'hello')"  # the module's name works too
    assert lines[2] == "FAILED: handle('/') is None: it gave (200, 'hello')"
    assert lines[3] == "[examples] 1 of 3 of the task's own examples held"
    assert "imported" not in done.stdout  # what the program prints is not the verdict


def test_all_examples_holding_pass(tmp_path: Path):
    done = check(tmp_path, ["assert handle('/') == (200, 'hello')"])
    assert done.returncode == 0 and "[examples] 1 of 1" in done.stdout


def test_a_call_that_never_ends_fails_its_example_and_the_rest_still_run(tmp_path: Path):
    done = check(tmp_path, ["assert spin() == 1", "assert handle('/') == (200, 'hello')"])
    assert done.returncode == 1
    assert "FAILED: spin() == 1: it raised TimeoutError" in done.stdout
    assert "held: handle('/')" in done.stdout


def test_a_module_that_does_not_import_fails_every_example_saying_why(tmp_path: Path):
    done = check(tmp_path, ["assert handle('/') == (200, 'hello')"], module="missing")
    assert done.returncode == 1
    assert "`import missing` failed: ModuleNotFoundError" in done.stdout
