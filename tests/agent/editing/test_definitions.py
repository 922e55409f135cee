"""A fenced block of nothing but definitions replaces those definitions where they are defined."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.editing.definitions import definition_edits, part_of_file
from whiz.agent.editing.edits import plan_edits
from whiz.agent.project.workspace import Workspace

STATS = """import math


def mean(xs):
    return sum(xs) / (len(xs) + 1)


@staticmethod
def spread(xs):
    return max(xs) - min(xs)
"""
FIXED = "Fixed:\n\n```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n\n\nprint(mean([1]))\n```\n"


def workspace(tmp_path: Path) -> Workspace:
    (tmp_path / "stats.py").write_text(STATS)
    (tmp_path / "test_stats.py").write_text("from stats import mean\nassert mean([2]) == 2\n")
    return Workspace(tmp_path)


def test_a_bare_function_replaces_that_function_only(tmp_path: Path):
    ws = workspace(tmp_path)
    [change] = plan_edits(ws, definition_edits(ws, FIXED))
    assert change.path == "stats.py"
    assert change.after == STATS.replace("(len(xs) + 1)", "len(xs)")  # spread and the import stay


def test_decorators_go_with_their_function(tmp_path: Path):
    ws = workspace(tmp_path)
    reply = "```\n@staticmethod\ndef spread(xs):\n    return abs(max(xs) - min(xs))\n```"
    [change] = plan_edits(ws, definition_edits(ws, reply))
    assert "@staticmethod\ndef spread(xs):\n    return abs(" in change.after


def test_a_function_in_a_list_items_indented_block_counts_and_code_quoted_as_it_is_does_not(tmp_path: Path):
    # Seen in whiz bench agent (fast, EditEval 25): the 0.5B wrote its fix as numbered steps, the
    # function in a block indented under "- Replace the line with:", then quoted a file as it is.
    ws = workspace(tmp_path)
    steps = "1. **Fix mean**:\n   - Replace it with:\n     ```python\n     def mean(xs):\n"
    steps += "         return sum(xs) / len(xs)\n     ```\n\nThe spread stays:\n\n"
    steps += "```python\n@staticmethod\ndef spread(xs):\n    return max(xs) - min(xs)\n```\n"
    [change] = plan_edits(ws, definition_edits(ws, steps))
    assert change.path == "stats.py" and change.after == STATS.replace("(len(xs) + 1)", "len(xs)")


def test_no_guess_where_the_block_is_more_than_definitions_or_the_name_is_unknown_or_ambiguous(
    tmp_path: Path,
):
    ws = workspace(tmp_path)
    assert definition_edits(ws, "```\nxs = [1]\ndef mean(xs):\n    return 0\n```") == []
    assert definition_edits(ws, "```\ndef median(xs):\n    return 0\n```") == []
    assert definition_edits(ws, "```\ndef mean(xs) return 0\n```") == []  # does not parse
    (tmp_path / "other.py").write_text("def mean(xs):\n    return 1\n")
    assert definition_edits(ws, FIXED) == []


def test_part_of_a_file_is_not_the_whole_file(tmp_path: Path):
    ws = workspace(tmp_path)
    assert part_of_file(ws, "stats.py", "def mean(xs):\n    return 0\n")
    assert not part_of_file(
        ws, "stats.py", "def mean(xs):\n    return 0\n\n\ndef spread(xs):\n    return 0\n"
    )
    assert not part_of_file(ws, "stats.py", "print('a program')\n")
