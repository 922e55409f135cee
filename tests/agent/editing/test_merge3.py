"""Three-way merge, as undo uses it: the turn's change taken out, the user's later change kept."""

from __future__ import annotations

import random

import pytest

from whiz.agent.editing.merge3 import merge3

BASE = "a\nb\nc\nd\ne\nf\ng\n"


def test_changes_far_apart_both_land() -> None:
    ours = BASE.replace("b\n", "B\n")
    theirs = BASE.replace("f\n", "F\n")
    assert merge3(BASE, ours, theirs) == "a\nB\nc\nd\ne\nF\ng\n"


def test_insertions_and_deletions_far_apart_both_land() -> None:
    ours = "top\n" + BASE
    theirs = BASE.replace("e\nf\n", "")
    assert merge3(BASE, ours, theirs) == "top\na\nb\nc\nd\ng\n"


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (BASE.replace("c\n", "mine\n"), BASE.replace("c\n", "theirs\n")),  # the same line
        (BASE.replace("c\n", "mine\n"), BASE.replace("d\n", "theirs\n")),  # lines next to each other
        (BASE.replace("c\n", ""), BASE.replace("c\n", "C\n")),  # deleted on one side, changed on the other
    ],
)
def test_overlapping_changes_are_refused(ours: str, theirs: str) -> None:
    assert merge3(BASE, ours, theirs) is None


def test_the_same_change_on_both_sides_is_taken_once() -> None:
    both = BASE.replace("d\n", "D\n")
    assert merge3(BASE, both, both) == both


def test_line_endings_and_a_missing_final_newline_are_kept() -> None:
    base = "one\r\ntwo\r\nthree\r\nfour"
    ours = "zero\r\none\r\ntwo\r\nthree\r\nfour"
    theirs = "one\r\ntwo\r\nthree\r\nFOUR"
    assert merge3(base, ours, theirs) == "zero\r\none\r\ntwo\r\nthree\r\nFOUR"


def test_repeated_lines_do_not_confuse_it() -> None:
    base = "}\n" * 5 + "x\n" + "}\n" * 5
    ours = "start\n" + base
    theirs = base.replace("x\n", "y\n")
    assert merge3(base, ours, theirs) == "start\n" + theirs


def test_one_side_unchanged_gives_the_other_side() -> None:
    rng = random.Random(7)
    for _ in range(200):
        base = "".join(rng.choice("abc\n") for _ in range(rng.randrange(30)))
        other = "".join(rng.choice("abcd\n") for _ in range(rng.randrange(30)))
        assert merge3(base, base, other) == other
        assert merge3(base, other, base) == other
