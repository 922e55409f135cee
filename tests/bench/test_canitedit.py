"""CanItEdit as a suite of `whiz bench agent`: scripts/canitedit.py turns the dataset's rows into
tasks whose tests pass on the reference edit and fail on the program before it, and the bench
reads them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from whiz.bench.agent import editeval_case
from whiz.bench.canitedit import canitedit_tasks
from whiz.bench.edit_tasks import EditTask, run_check

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "canitedit.py"

ROW = {
    "id": 7,
    "name": "stack-pop",
    "full_name": "7_stack_pop",
    "before": "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n"
    "        self.items.append(x)\n\n    def pop(self):\n        return self.items[0]\n",
    "after": "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n"
    "        self.items.append(x)\n\n    def pop(self):\n        return self.items.pop()\n",
    # CanItEdit's tests: module-level code run after the program, helpers and all.
    "tests": "def filled(*xs):\n    s = Stack()\n    for x in xs:\n        s.push(x)\n    return s\n\n"
    "s = filled(1, 2, 3)\nassert s.pop() == 3\nassert s.pop() == 2\nassert s.items == [1]\n",
    "instruction_descriptive": "Make pop remove and return the last item pushed.",
    "instruction_lazy": "pop should be LIFO",
    "taxonomy": {"change_kind": "corrective"},
}


def script():
    spec = importlib.util.spec_from_file_location("canitedit_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_converted_task_passes_on_the_reference_and_fails_on_the_program_before_it(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"row": ROW}) + "\n")  # as the datasets-server API gives them
    out = tmp_path / "canitedit.jsonl"
    assert script().main(["--from", str(rows), "--out", str(out), "--verify"]) == 0
    (task,) = canitedit_tasks(out, None, say=print)
    assert (task.task_id, task.filename, task.suite) == ("CanItEdit/7-stack_pop", "stack_pop.py", "canitedit")
    assert task.instruction == ROW["instruction_descriptive"] and task.code == ROW["before"]
    assert run_check(task, ROW["after"]) and not run_check(task, ROW["before"])
    case = editeval_case(task)
    assert case.suite == "canitedit" and case.prompt.startswith("In stack_pop.py: Make pop")


def test_the_lazy_wording_and_tests_that_cannot_live_in_a_function_still_convert():
    module = script()
    row = dict(ROW, tests="global seen\nseen = 1\n" + ROW["tests"])
    task = module.convert(row, "lazy")
    assert task["instruction"] == "pop should be LIFO" and "exec(compile(" in task["test"]
    assert module.passes(ROW["after"], task["test"]) and not module.passes(ROW["before"], task["test"])


def test_tests_whose_text_indenting_would_change_run_as_they_are():
    # CanItEdit's real rows: a multi-line string compared with output (indented, it gains four
    # spaces a line), and a `def print` in an `if True:` block (inside check(), print is then a
    # local name from the start and its earlier use fails).
    module = script()
    text = 'expected = """3\n2"""\nassert "\\n".join(str(x) for x in [3, 2]) == expected\n'
    row = dict(ROW, tests=ROW["tests"] + text)
    assert module.passes(ROW["after"], module.convert(row)["test"])
    shadow = "if True:\n    print('checking')\n    def print(*a):\n        pass\n" + ROW["tests"]
    shadowed = module.convert(dict(ROW, tests=shadow))["test"]
    assert module.passes(ROW["after"], shadowed) and not module.passes(ROW["before"], shadowed)


def test_rows_that_cannot_be_read_are_one_clear_line_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert script().main(["--from", str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 1
    assert "could not read the rows" in capsys.readouterr().err and not out.exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": 1, "before": ""}) + "\n")
    assert script().main(["--from", str(bad), "--out", str(out)]) == 1
    assert "not CanItEdit's rows" in capsys.readouterr().err and not out.exists()


def test_a_file_that_is_not_the_converted_suite_is_named_with_how_to_get_it(tmp_path):
    said = []
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text('{"task_id": "x"}\n')
    assert canitedit_tasks(wrong, None, said.append) is None
    assert "is not CanItEdit's converted JSONL" in said[0] and "scripts/canitedit.py" in said[0]


def test_rows_are_read_page_by_page_and_a_row_cut_short_is_asked_for_again_alone(monkeypatch):
    import io
    import urllib.parse

    module = script()
    asked = []

    def urlopen(url, timeout):
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(url).query))
        offset, length = int(query["offset"]), int(query["length"])
        asked.append((offset, length))
        cut = ["tests"] if length > 1 else []  # row 1 is cut short in a page, whole alone
        entries = [
            {"row_idx": i, "row": dict(ROW, id=i), "truncated_cells": cut if i == 1 else []}
            for i in range(offset, min(offset + length, 3))
        ]
        return io.BytesIO(json.dumps({"rows": entries, "num_rows_total": 3}).encode())

    monkeypatch.setattr(module.urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(module, "PAGE", 2)
    rows = module.fetch_rows()
    assert [r["id"] for r in rows] == [0, 1, 2] and asked == [(0, 2), (1, 1), (2, 2)]


def test_tests_that_read_the_programs_source_run_from_a_file():
    # Two of CanItEdit's rows check the edited program through `inspect`, which needs a file.
    module = script()
    row = dict(ROW, tests="import inspect\nassert 'pop()' in inspect.getsource(Stack)\n" + ROW["tests"])
    task = module.convert(row)
    assert module.passes(ROW["after"], task["test"])
    name = task["filename"]
    bench_task = EditTask("canitedit", task["task_id"], name, "", ROW["before"], test=task["test"])
    assert run_check(bench_task, ROW["after"]) and not run_check(bench_task, ROW["before"])
