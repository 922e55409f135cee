"""The matching cascade on its own: levels, ambiguity, re-indentation and the nearest window."""

from __future__ import annotations

import pytest

from whiz.agent.editing.matching import (
    Ambiguous,
    Match,
    find_block,
    nearest_window,
    normalise_punctuation,
    reindent,
)

LINES = ["def f():", "    x = 1  ", "    return x", "", "def g():", "    x = 1", "    return x"]


def test_levels_in_order() -> None:
    assert find_block(LINES, ["def g():"]) == Match(4, 5, 0)
    assert find_block(LINES, ["    x = 1  ", "    return x"]) == Match(1, 3, 0)
    assert find_block(LINES, ["def f():  ", "    x = 1"]) == Match(0, 2, 1)
    assert find_block(LINES, ["def f():", "x = 1"]) == Match(0, 2, 2)
    assert find_block(["s = \u201cA\u201d\u00a0# \u2014"], ['s = "A" # -']) == Match(0, 1, 3)
    assert find_block(LINES, ["def h():"]) is None


def test_several_matches_are_ambiguous_unless_first_wins() -> None:
    with pytest.raises(Ambiguous) as caught:
        find_block(LINES, ["x = 1", "return x"])
    assert caught.value.starts == [1, 5]
    assert find_block(LINES, ["x = 1", "return x"], first_wins=True) == Match(1, 3, 2)
    assert find_block(LINES, ["x = 1", "return x"], start=2) == Match(5, 7, 2)


def test_reindent_moves_replacement_to_the_files_indentation() -> None:
    found = ["        if a:", "            b()"]
    assert reindent(["if a:", "    c()", "", "d()"], ["if a:", "    b()"], found) == [
        "        if a:",
        "            c()",
        "",
        "        d()",
    ]
    assert reindent(["x"], ["  y"], ["  y"]) == ["x"]


def test_nearest_window_and_punctuation() -> None:
    assert nearest_window(LINES, ["def g():", "    y = 1"])[:2] == (4, 6)
    assert nearest_window([], ["x"]) is None
    assert normalise_punctuation("\u2018a\u2019 \u2026\u200b") == "'a' ..."
