"""The code a task is about goes into its first message, found by the names it mentions."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.context.prompt import task_message
from whiz.agent.project.workspace import Workspace
from whiz.environments.local import CommandResult
from whiz.modes.healing import heal_messages

STATS = "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n"
TEST = "from lib.stats import mean\n\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n"


def big_repo(root: Path) -> Workspace:
    """A repository too big to attach whole: many modules, each with its own functions."""
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "stats.py").write_text(STATS)
    (root / "test_stats.py").write_text(TEST)
    for i in range(12):
        body = "".join(f"def helper_{i}_{k}(x):\n    return x * {k}\n\n\n" for k in range(40))
        (root / f"mod{i}.py").write_text(body)
    return Workspace(root)


def test_a_task_naming_only_a_function_gets_that_functions_file(tmp_path: Path):
    ws = big_repo(tmp_path)
    text, attached = task_message(ws, "Fix the bug in mean so the tests pass.")
    assert "lib/stats.py:\n```\n" + STATS in text
    assert attached[-1] == "lib/stats.py"  # a bare code block in the reply rewrites it
    assert "helper_3_7" not in text  # the rest of the repository stays out


def test_a_large_file_gives_only_the_definition_named(tmp_path: Path):
    ws = big_repo(tmp_path)
    big = "".join(f"def other_{k}(x):\n    return x + {k}\n\n\n" for k in range(400))
    (tmp_path / "lib" / "stats.py").write_text(big + STATS)
    text, _ = task_message(ws, "mean is off by one", code_tokens=300)
    assert "lib/stats.py (lines 1601-1602):\n```\n" + STATS in text
    assert "other_5" not in text


def test_a_tiny_repository_goes_whole(tmp_path: Path):
    (tmp_path / "stats.py").write_text(STATS)
    (tmp_path / "test_stats.py").write_text(TEST.replace("lib.stats", "stats"))
    text, _ = task_message(Workspace(tmp_path), "Fix the failing test.")
    assert STATS in text and "def test_mean" in text


def test_a_later_message_does_not_repeat_a_tiny_repository(tmp_path: Path):
    (tmp_path / "stats.py").write_text(STATS)
    text, _ = task_message(Workspace(tmp_path), "And now?", first=False)
    assert text == "And now?"


def test_a_heal_sees_the_code_a_traceback_leads_to(tmp_path: Path):
    ws = big_repo(tmp_path)
    output = (
        "    def test_mean():\n>       assert mean([1, 2, 3]) == 2\nE       assert 1.5 == 2\n\n"
        "test_stats.py:5: AssertionError\nFAILED test_stats.py::test_mean\n"
    )
    baseline = CommandResult("pytest -q", 1, output, 10.0)
    messages = heal_messages(ws, "Make the tests pass.", "pytest -q", baseline)
    user = messages[-1]["content"]
    assert STATS in user and "def test_mean" in user and "fail now" in user
