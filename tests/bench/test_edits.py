"""`whiz bench edits`: its tasks, its checks, and a short run against the fake engine."""

import ast
import json
import re

import pytest

from whiz.bench.edit_report import mode_summary
from whiz.bench.edit_tasks import (
    EditTask,
    default_editeval_path,
    extract_code,
    load_editeval,
    module_task,
    rename_names,
    rename_tasks,
)
from whiz.bench.edits import Run, first_difference, main, user_prompt
from whiz.engine.fake import last_user_message

EDITEVAL = default_editeval_path()
needs_editeval = pytest.mark.skipif(EDITEVAL is None, reason="shared/bench/editeval.jsonl not found")


@pytest.fixture(scope="module")
def renames() -> list[EditTask]:
    return rename_tasks()


def changed_words(before: str, after: str) -> set[tuple[str, str]]:
    """The (old, new) identifier pairs that turn `before` into `after`, word by word."""
    pairs = set()
    for old_line, new_line in zip(before.splitlines(), after.splitlines(), strict=True):
        old_words, new_words = re.findall(r"\w+|\W", old_line), re.findall(r"\w+|\W", new_line)
        assert len(old_words) == len(new_words)
        pairs |= {(a, b) for a, b in zip(old_words, new_words, strict=True) if a != b}
    return pairs


def test_rename_suite_is_about_thirty_windows_of_whole_definitions(renames):
    assert 25 <= len(renames) <= 30
    assert rename_tasks() == renames  # deterministic
    kinds = {t.task_id.split(":")[1] for t in renames}
    assert kinds == {"rename-function", "rename-parameter", "add-decorator"}
    for task in renames:
        lines = task.code.splitlines()
        assert 40 <= len(lines) <= 60, task.task_id
        last = ast.parse(task.code).body[-1]
        assert isinstance(last, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef), task.task_id
        assert last.end_lineno == len(lines)
        assert ast.parse(task.expected) and task.expected != task.code


def test_expected_files_differ_only_in_the_named_identifier_or_decorator(renames):
    for task in renames:
        old, new = re.findall(r"`@?([\w.]+)`", task.instruction)[-2:]
        if task.task_id.endswith("add-decorator"):
            removed = task.expected.replace("@log_calls\n", "", 1)
            assert removed == task.code and f"@log_calls\ndef {new}(" in task.expected
        else:
            assert changed_words(task.code, task.expected) == {(old, new)}, task.task_id


def test_rename_touches_names_not_strings_comments_or_attributes():
    code = "def f(x):\n    # f of x\n    return g.f(x) + f(x) + len('f')\n"
    assert rename_names(code, "f", "h") == "def h(x):\n    # f of x\n    return g.h(x) + h(x) + len('f')\n"
    # A name that also appears in a docstring is ambiguous, so no task uses it.
    lines = ["import os", *[f"X{i} = {i}" for i in range(45)], "", "def f():", '    "f!"', "    return 1"]
    source = "\n".join(lines)
    assert module_task("m", source, "rename-function") is None
    assert module_task("m", source, "add-decorator") is not None


def test_extract_code_takes_the_fenced_block_even_unterminated():
    assert extract_code("Here:\n```python\nx = 1\n```\nDone.") == "x = 1\n"
    assert extract_code("```python\nx = 1\ny") == "x = 1\ny"
    assert extract_code("x = 1") == "x = 1"


def test_a_rename_reply_is_correct_only_when_it_matches(renames):
    task = renames[0]
    assert task.is_correct(f"```python\n{task.expected.rstrip()}   \n```\n")
    assert not task.is_correct(f"```python\n{task.code}```")


@needs_editeval
def test_editeval_loads_and_checks_by_running_the_test():
    tasks = load_editeval(EDITEVAL)
    assert len(tasks) == 194 and len({t.task_id for t in tasks}) == 194
    references = [json.loads(line)["output"] for line in EDITEVAL.read_text().splitlines()]
    for i in (0, 60):  # 60 has a context whose {{Code}} the code replaces
        assert tasks[i].suite == "editeval" and tasks[i].test
        assert tasks[i].is_correct(f"```python\n{references[i]}\n```")
        assert not tasks[i].is_correct(tasks[i].code)
    assert tasks[60].context and "{{Code}}" in tasks[60].context


def test_identity_with_plain_mode_and_the_speedups():
    assert first_difference("abc", "abc") is None
    assert first_difference("abc", "abd") == 2 and first_difference("ab", "abc") == 2
    rows = []
    for plain_speed, fast_speed, fast_text in [(10.0, 20.0, "x"), (10.0, 40.0, "y"), (20.0, 20.0, "x")]:
        plain = Run("t", "plain", "x", tokens_per_s=plain_speed, total_s=2.0, correct=True)
        fast = Run("t", "prediction", fast_text, tokens_per_s=fast_speed, total_s=1.0, accepted=3, rejected=1)
        fast.identical = fast_text == "x"
        rows.append({"plain": plain, "prediction": fast})
    s = mode_summary(rows, "prediction")
    assert (s["identical"], s["compared"], s["correct"]) == (2, 3, 0)
    assert s["speedup"] == 2.0 and s["speedup_per_task"] == 2.0 and s["total_speedup"] == 2.0
    assert s["acceptance_rate"] == 0.75
    assert mode_summary(rows, "plain")["identical"] is None


@needs_editeval
def test_a_short_run_prints_tables_then_one_json_line(serve_fake, capsys, renames):
    tasks = renames[:2] + load_editeval(EDITEVAL)[:2]
    references = [json.loads(line)["output"] for line in EDITEVAL.read_text().splitlines()[:2]]
    answers = [t.expected for t in renames[:2]] + references
    replies = {user_prompt(t): f"```python\n{a}\n```" for t, a in zip(tasks, answers, strict=True)}
    script = lambda conversation: replies.get(last_user_message(conversation), "no")  # noqa: E731
    served = serve_fake(script=script, engine_kw={"step_s": 0.0002, "token_s": 0.00001})

    assert main(served.root, "all", 2, None, None, str(EDITEVAL)) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert {"bench", "target", "model", "date", "suites", "identical"} <= set(result)
    assert result["bench"] == "edits" and result["model"] == "fake" and result["whiz"] is True
    assert set(result["suites"]) == {"rename", "editeval", "freeform"}
    freeform = result["suites"].pop("freeform")
    # New text and an unrelated prediction: its drafts miss, and the output is still plain's.
    assert freeform["prediction"]["rejected_tokens"] > 0
    assert freeform["prediction"]["identical"] == freeform["lookup"]["identical"] == 2
    for modes in result["suites"].values():
        assert set(modes) == {"plain", "lookup", "prediction"}
        for mode, s in modes.items():
            assert s["tasks"] == 2 and s["correct"] == 2 and s["decode_tokens_per_s"] > 0 and s["ttft_ms"] > 0
            assert s["identical"] == (None if mode == "plain" else 2)
        assert modes["prediction"]["accepted_tokens"] > 0 and modes["plain"]["accepted_tokens"] == 0
    assert result["identical"] == {"total": 12, "differ": 0, "differences": []}
    assert "whiz bench edits — rename" in captured.out and "identical to plain" in captured.out
    assert len(captured.err.strip().splitlines()) == 6  # one progress line per task


def test_an_unreachable_target_fails_with_one_line(capsys):
    assert main("http://127.0.0.1:9", "rename", 1, "fake", None, None) == 1
    assert "cannot reach" in capsys.readouterr().err
