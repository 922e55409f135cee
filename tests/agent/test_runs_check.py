"""`--check`: a program passes when it exits 0 or is still running, traceback-free, at the timeout."""

from __future__ import annotations

import sys
from pathlib import Path

from whiz.agent.runs_check import main, with_check

from .conftest import sr

PY = sys.executable
LOOP = "import time\nprint('game started')\nwhile True:\n    time.sleep(0.1)\n"
CRASH = "import time\nprint('game started')\nraise SystemExit(undefined_thing)\n"


def test_a_program_still_running_at_the_timeout_passes(tmp_path: Path, capsys):
    (tmp_path / "game.py").write_text(LOOP)
    assert main(["--timeout", "1", "--", f"{PY} {tmp_path / 'game.py'}"]) == 0
    assert "still running after 1 s: it runs" in capsys.readouterr().out


def test_a_crash_or_a_traceback_fails(tmp_path: Path, capsys):
    assert main(["--timeout", "5", "--", "exit 3"]) == 1
    # A traceback fails the check even when the program goes on running (a caught-and-printed crash).
    noisy = (
        "import time, traceback\ntry:\n    1/0\nexcept Exception:\n    traceback.print_exc()\ntime.sleep(9)\n"
    )
    (tmp_path / "noisy.py").write_text(noisy)
    assert main(["--timeout", "1", "--", f"{PY} {tmp_path / 'noisy.py'}"]) == 1
    assert "traceback" in capsys.readouterr().out


async def test_the_check_decides_the_turn_as_a_test_command_does(harness, project: Path):
    write = sr("game.py", "", CRASH.rstrip("\n"))
    fix = sr("game.py", "raise SystemExit(undefined_thing)", "while True:\n    time.sleep(0.1)")
    h = harness([write, fix], test_cmd=with_check(None, "python game.py", timeout_s=1))
    result = await h.agent.run("Write a game loop in game.py.")
    assert result.ok and "the tests pass" in result.message
    told = h.model.requests[1].items[-1]["content"]
    assert "NameError: name 'undefined_thing'" in told and "it does not run" in told
    assert '  File "game.py", line 3' in told  # by its path in the workspace
    # The model is shown the check as the user wrote it: no path of this machine's Python or of
    # whiz, which would make the prompt (and so seeded output) differ from machine to machine.
    for request in h.model.requests:
        shown = request.instructions + "".join(str(i.get("content", "")) for i in request.items)
        assert PY not in shown and "runs_check" not in shown
    assert "`python game.py`" in h.model.requests[0].instructions
    assert "$ python game.py\n" in told
