"""`whiz bench tasks` end to end on the fake engine: workspaces, verdicts, the table and the JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from whiz.bench.edit_tasks import load_editeval
from whiz.bench.tasks import command_for_tests, main, workspace_for
from whiz.engine.fake import last_user_message

ROWS = [
    {
        "task_id": "EditEval/0",
        "instruction": "Fix add so that it adds.",
        "input": "def add(a, b):\n    return a - b\n",
        "test": "def check():\n    assert add(1, 2) == 3\n",
    },
    {
        "task_id": "EditEval/1",
        "instruction": "Make double return twice its argument.",
        "input": "def double(x):\n    return x\n",
        "test": "def check():\n    assert double(2) == 4\n",
    },
]


def script(conversation: str) -> str:
    task = last_user_message(conversation)
    if "edit_0.py" in task:
        return "edit_0.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n"
    # A SEARCH that never matches the file.
    return "edit_1.py\n<<<<<<< SEARCH\n    return y\n=======\n    return 2 * x\n>>>>>>> REPLACE\n"


def test_the_workspace_test_script_checks_the_file(tmp_path: Path) -> None:
    data = tmp_path / "e.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in ROWS))
    task = load_editeval(data)[0]
    workspace_for(task, tmp_path)
    check = [sys.executable, "test_edit_0.py"]
    failed = subprocess.run(check, cwd=tmp_path, capture_output=True, text=True)
    assert failed.returncode != 0
    assert "assert add(1, 2) == 3" in failed.stderr  # the failing assertion is quoted, not only named
    # The agent's command runs it with pytest (whiz's tests have it): the failure shows the values.
    command = command_for_tests(task)
    assert "-m pytest" in command
    failed = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert failed.returncode != 0 and "where -1 = add(1, 2)" in failed.stdout, failed.stdout
    (tmp_path / "edit_0.py").write_text("def add(a, b):\n    return a + b\n")
    assert subprocess.run(check, cwd=tmp_path, capture_output=True).returncode == 0
    passed = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert passed.returncode == 0 and "1 passed" in passed.stdout
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")  # Python's own
    assert left == ["e.jsonl", "edit_0.py", "test_edit_0.py"]


def test_a_task_whose_code_runs_in_a_context_is_checked_in_it(tmp_path: Path) -> None:
    row = {
        "task_id": "EditEval/2",
        "instruction": "Make area return the area.",
        "input": "    def area(self):\n        return 0\n",
        "context": "class Square:\n    side = 3\n{{Code}}\n",
        "test": "def check():\n    assert Square().area() == 9\n",
    }
    data = tmp_path / "e.jsonl"
    data.write_text(json.dumps(row))
    workspace_for(load_editeval(data)[0], tmp_path)
    check = [sys.executable, "test_edit_2.py"]
    failed = subprocess.run(check, cwd=tmp_path, capture_output=True, text=True)
    assert failed.returncode != 0 and "assert Square().area() == 9" in failed.stderr
    (tmp_path / "edit_2.py").write_text("    def area(self):\n        return self.side**2\n")
    assert subprocess.run(check, cwd=tmp_path, capture_output=True).returncode == 0


def test_bench_tasks_reports_pass_rate_and_well_formed_edits(serve_fake, tmp_path: Path, capsys) -> None:
    server = serve_fake(script=script)
    data = tmp_path / "e.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in ROWS))
    assert main(target=server.root, limit=2, data=data) == 0
    out = capsys.readouterr().out
    assert "pass rate" in out
    report = json.loads(out.strip().splitlines()[-1])
    summary = report["results"]["text"]["summary"]
    assert summary["tasks"] == 2 and summary["pass_rate"] == 0.5
    # Task 0: one well-formed edit. Task 1: three edits that never match.
    assert summary["edit_attempts"] == 4 and summary["well_formed_edits"] == 0.25
    assert summary["well_formed_actions"] == 1 / 4  # four replies, one acted well
    assert summary["tokens_per_s"] > 0


def test_bench_tasks_refuses_bad_options(tmp_path: Path, capsys) -> None:
    assert main(actions="json", data=tmp_path / "none.jsonl") == 2
    assert main(data=tmp_path / "none.jsonl") == 2
    assert "no EditEval data" in capsys.readouterr().err
