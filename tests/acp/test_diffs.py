"""A file's other side from a unified diff (`acp/diffs.py`): what ACP's diff content is made of."""

from __future__ import annotations

import random

import pytest

from whiz.acp.diffs import DiffMismatch, other_side
from whiz.acp.updates import split_diff
from whiz.agent.editing.edits import FileChange, unified_diff


def edited(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(0, 4)):
        roll = rng.random()
        if roll < 0.3 and lines:
            lines.pop(rng.randrange(len(lines)))
        elif roll < 0.6:
            lines.insert(rng.randint(0, len(lines)), rng.choice("abcd") + "\n")
        elif lines:
            lines[rng.randrange(len(lines))] = "changed\n"
    out = "".join(lines)
    return out.rstrip("\n") if rng.random() < 0.3 else out


def test_both_sides_come_back_from_either_over_many_edits() -> None:
    rng = random.Random(7)
    cases = [("", "new\nfile\n"), ("gone\n", ""), ("no newline", "no newline either")]
    for _ in range(300):
        before = "".join(rng.choice("abc") + "\n" for _ in range(rng.randint(0, 30)))
        cases.append((before, edited(rng, before)))
    for before, after in cases:
        diff = unified_diff(FileChange("f.py", before, after))
        assert other_side(after, diff, reverse=True) == before
        assert other_side(before, diff, reverse=False) == after


def test_a_diff_that_does_not_fit_the_text_is_refused() -> None:
    diff = unified_diff(FileChange("f.py", "a\nb\n", "a\nc\n"))
    with pytest.raises(DiffMismatch):
        other_side("a\nsomething else\n", diff, reverse=True)


def test_a_multi_file_diff_splits_per_file() -> None:
    one = unified_diff(FileChange("a.py", "x\n", "y\n"))
    two = unified_diff(FileChange("b.py", "-- x\n", "z\n"))  # removed: "--- x", no header
    assert split_diff(one + two) == [one, two]
