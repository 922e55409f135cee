"""A heal's test runs go back to the model as feedback: a `.env`'s values they print stay out. The
tests here read `.env`, which commands see only where the user lets them (`allow_secret_reads`)."""

from __future__ import annotations

from pathlib import Path

from tests.modes.test_healing import BUGGY, FIX, WRONG, run_heal
from whiz.environments import SandboxOptions

TOKEN = "tok_live_9fQ2mZx81LwPq"
CHECK = "from calc import average\nprint(open('.env').read())\nassert average([2, 4]) == 3, average([2, 4])\n"


def test_the_failing_runs_output_is_fed_back_without_a_secret_value(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "calc.py").write_text(BUGGY)
    (project / "check.py").write_text(CHECK)
    (project / ".env").write_text(f"API_TOKEN={TOKEN}\n")
    reads = SandboxOptions(allow_secret_reads=True)
    code, _events, pool = run_heal(project, [[WRONG], [FIX]], sandbox=reads)
    assert code == 0
    second = pool.sources["fast"].calls[1]
    assert "API_TOKEN=…" in second[-1]["content"]
    assert all(TOKEN not in message["content"] for call in pool.sources["fast"].calls for message in call)


def test_without_the_users_leave_the_tests_cannot_read_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "calc.py").write_text(BUGGY)
    (project / "check.py").write_text(CHECK)
    (project / ".env").write_text(f"API_TOKEN={TOKEN}\n")
    code, _events, pool = run_heal(project, [[FIX]])
    assert code != 0  # the check needs .env, which no copy holds
    assert all(TOKEN not in message["content"] for call in pool.sources["fast"].calls for message in call)
