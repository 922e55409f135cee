"""`whiz bench agent --tasks DIR`: a folder of hand-written tasks, each judged by hidden tests."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from whiz.agent.models.scripted_model import ScriptedModel
from whiz.bench.agent import VARIANTS, dir_case, main, run_suite
from whiz.bench.dir_tasks import TaskDirError, load_tasks
from whiz.modes.pool import ScriptedPool

BUGGY = "def last(xs):\n    return xs[len(xs)]\n"
FIXED = "def last(xs):\n    return xs[len(xs) - 1]\n"
JUDGE = "from solution import last\n\n\ndef test_last():\n    assert last([1, 2, 3]) == 3\n"


def write_task(root: Path, task_id: str, *, test_cmd: str | None = None, toml: bool = False) -> Path:
    folder = root / task_id
    (folder / "files").mkdir(parents=True)
    (folder / "judge").mkdir()
    (folder / "files" / "solution.py").write_text(BUGGY)
    (folder / "judge" / "test_judge.py").write_text(JUDGE)
    spec = {"task": "Fix the bug in the function last in solution.py", "judge": "{python} test_judge.py"}
    if test_cmd:
        spec["test_cmd"] = test_cmd
    if toml:
        (folder / "task.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in spec.items()))
    else:
        (folder / "task.json").write_text(json.dumps(spec))
    # The judge as a script: its test runs when it is run.
    (folder / "judge" / "test_judge.py").write_text(JUDGE + "\n\ntest_last()\n")
    return folder


def test_a_folder_of_tasks_loads_in_order_from_json_or_toml(tmp_path):
    write_task(tmp_path, "b", toml=True)
    write_task(tmp_path, "a", test_cmd="{python} -m pytest -q")
    tasks = load_tasks(tmp_path)
    assert [t.task_id for t in tasks] == ["a", "b"]
    assert tasks[0].test_cmd == "{python} -m pytest -q" and tasks[1].test_cmd is None
    assert tasks[1].task == "Fix the bug in the function last in solution.py"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"judge": "x"}, "'task' must be a non-empty string"),
        ({"task": "t", "judge": "x", "tests": "y"}, "unknown keys ['tests']"),
        ({"task": "t"}, "'judge' must be a non-empty string"),
    ],
)
def test_a_bad_task_file_names_its_folder_and_what_is_wrong(tmp_path, spec, says):
    folder = tmp_path / "t1"
    (folder / "files").mkdir(parents=True)
    (folder / "task.json").write_text(json.dumps(spec))
    with pytest.raises(TaskDirError, match="t1") as caught:
        load_tasks(tmp_path)
    assert says in str(caught.value)


def test_bad_task_folders_are_one_clear_line(tmp_path, capsys):
    assert main(tasks=tmp_path / "nowhere") == 2
    assert "not a folder of tasks" in capsys.readouterr().err
    assert main(tasks=tmp_path) == 2
    assert "no tasks" in capsys.readouterr().err
    assert main(with_tests=True, suites="programs") == 2
    err = capsys.readouterr().err
    assert "--with-tests" in err and "needs --tasks DIR" in err


async def test_the_hidden_judge_decides_and_the_agent_never_sees_it_without_tests(tmp_path):
    write_task(tmp_path / "tasks", "last")
    case = dir_case(load_tasks(tmp_path / "tasks")[0])
    replies = [f"solution.py\n```python\n{FIXED}```\n", f"solution.py\n```python\n{BUGGY}```\n"]
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel([replies.pop(0)])})
    fast = VARIANTS["fast"]
    results = await run_suite(
        [case], [fast, replace(fast, name="fast+tests", with_tests=True)], pool, say=lambda line: None,
        keep=tmp_path / "keep",
    )  # fmt: skip
    assert results["fast"]["seeds"][0]["runs"][0]["passed"] is True
    assert results["fast+tests"]["seeds"][0]["runs"][0]["passed"] is False
    plain = tmp_path / "keep" / "seed0" / "fast" / "last" / "ws"
    tested = tmp_path / "keep" / "seed0" / "fast+tests" / "last" / "ws"
    # Plain: the judge's files stay hidden; with tests (and no test_cmd of its own) they are given.
    assert sorted(p.name for p in plain.iterdir()) == ["solution.py"]
    assert (tested / "test_judge.py").is_file()
