"""Localization with scripted replies: what a reply says is parsed strictly, checked against the
workspace's functions, widened where the model is unsure, and garbage falls back to a plain heal."""

from __future__ import annotations

from pathlib import Path

import pytest

from whiz.agent.project.test_files import TestFiles
from whiz.agent.project.workspace import Workspace
from whiz.environments.secret_rules import SecretFiles
from whiz.modes.candidates import ScriptedCandidates
from whiz.modes.localize import Hint, definition_index, localize, parse_hints, places_from

STATS = '''def mean(xs):
    """The average of the numbers in xs."""
    return sum(xs) / (len(xs) + 1)


def spread(xs):
    return max(xs) - min(xs)


class Counter:
    def __init__(self):
        self.n = 0

    def bump(self, by=1):
        self.n += by + 1
'''
FAILURE = (
    "    def test_mean():\n>       assert mean([1, 2, 3]) == 2\nE       assert 1.5 == 2\n"
    "test_stats.py:5: AssertionError\n"
)
GOOD = "FILE: stats.py\nFUNCTION: mean\nLINES: 1-3\nBUG: It divides by len(xs) + 1 instead of len(xs).\n"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "stats.py").write_text(STATS)
    (tmp_path / "test_stats.py").write_text(
        "from stats import mean\n\ndef test_mean():\n    assert mean([4]) == 4\n"
    )
    return Workspace(tmp_path)


def places(ws: Workspace, reply: str, task: str = "Fix the bug so the tests pass.", failure: str = FAILURE):
    index = definition_index(ws, TestFiles("pytest"))
    return places_from(parse_hints(reply), index, task, failure, str(ws.root))


def test_a_good_reply_names_one_place_with_its_lines_and_hypothesis(ws):
    assert parse_hints(GOOD) == [
        Hint("stats.py", "mean", (1, 3), "It divides by len(xs) + 1 instead of len(xs).")
    ]
    found = places(ws, GOOD)
    assert found.sure
    (place,) = found.places
    assert (place.function.path, place.function.name, place.function.start, place.function.end) == (
        "stats.py", "mean", 1, 3,
    )  # fmt: skip
    assert place.hypothesis.startswith("It divides") and place.origin == "model"


def test_markdown_around_the_keys_and_a_method_by_its_class_are_read():
    reply = "**File:** `./stats.py`\n**Function:** `Counter.bump()`\n**Lines:** 13 to 14\n"
    reply += "- Bug: adds one too many"
    assert parse_hints(reply) == [Hint("stats.py", "Counter.bump", (13, 14), "adds one too many")]


def test_a_method_is_a_place_with_its_class_and_indent(ws):
    found = places(ws, "FILE: stats.py\nFUNCTION: bump\nBUG: adds one too many")
    place = found.places[0]
    assert place.function.qualname == "Counter.bump" and place.function.indent == "    "
    assert place.function.source.startswith("    def bump(self, by=1):")


def test_a_partial_reply_is_completed_from_the_workspace(ws):
    # A file and a line, no function: the function spanning that line.
    found = places(ws, "FILE: stats.py\nLINES: 3")
    assert [p.function.name for p in found.places][0] == "mean"
    assert not found.sure  # so the task's and the traceback's functions come along
    # A function, no file: the one file that defines it.
    assert places(ws, "FUNCTION: spread").places[0].function.path == "stats.py"


def test_garbage_names_no_place_so_the_heal_is_plain(ws):
    for reply in ("", "The bug is that it divides wrong. Here is the fix: ...", "```python\nx = 1\n```"):
        assert parse_hints(reply) == []
        assert places(ws, reply).places == []


def test_an_unsure_reply_adds_the_places_the_task_and_the_traceback_name(ws):
    # A function that does not exist: the task's function and the traceback's come instead.
    found = places(ws, "FILE: stats.py\nFUNCTION: average", task="Fix the bug in mean.")
    assert not found.sure
    assert [(p.function.name, p.origin) for p in found.places] == [("mean", "task")]
    # Two functions named: both are places, the model's first.
    found = places(ws, "FILE: stats.py\nFUNCTION: mean, spread\nBUG: wrong")
    assert [p.function.name for p in found.places][:2] == ["mean", "spread"] and not found.sure
    # A file that does not exist, but the function does (in one other file): taken, unsure.
    found = places(ws, "FILE: statistics.py\nFUNCTION: mean")
    assert found.places[0].function.path == "stats.py" and not found.sure


def test_the_traceback_names_a_place_when_the_task_does_not(ws):
    failure = 'Traceback (most recent call last):\n  File "stats.py", line 7, in spread\nValueError: empty\n'
    found = places(ws, "FILE: nowhere.py", failure=failure)
    assert [(p.function.name, p.origin) for p in found.places] == [("spread", "traceback")]


def test_test_files_are_never_a_place(ws):
    index = definition_index(ws, TestFiles("pytest"))
    assert {f.path for f in index} == {"stats.py"}


async def test_localize_asks_once_greedily_with_the_failure_and_the_code(ws):
    source = ScriptedCandidates([[GOOD]])
    found = await localize(source, ws, "Fix the bug so the tests pass.", "pytest", FAILURE, seed=7)
    (draw,) = source.draws
    assert draw.n == 1 and draw.temperature == 0.0
    user = source.calls[0][-1]["content"]
    assert "assert 1.5 == 2" in user and "return sum(xs) / (len(xs) + 1)" in user
    assert found.sure and found.reply == GOOD and found.places[0].function.name == "mean"


async def test_a_workspace_with_one_function_outside_its_tests_is_localized_without_asking(tmp_path):
    code = "from typing import List\n\n\ndef longest(xs: List[str]):\n    return xs[0]\n"
    (tmp_path / "edit.py").write_text(code)
    test = "from edit import longest\n\ndef test_it():\n    assert longest(['a'])\n"
    (tmp_path / "test_edit.py").write_text(test)
    source = ScriptedCandidates([[GOOD]])
    found = await localize(source, Workspace(tmp_path), "Return the last longest string.", "pytest", FAILURE)
    assert source.calls == [] and found.sure and found.generation is None
    (only,) = found.places
    assert (only.function.name, only.origin) == ("longest", "only")


def test_a_function_in_a_file_marked_secret_is_never_a_place(tmp_path):
    (tmp_path / "prod_secrets.py").write_text('def token():\n    return "sk-live-123"\n')
    (tmp_path / "stats.py").write_text(STATS)
    ws = Workspace(tmp_path, SecretFiles(extra=("prod_secrets.py",)))
    assert "prod_secrets.py" not in {f.path for f in definition_index(ws, TestFiles("pytest"))}
    named = places(ws, "FILE: prod_secrets.py\nFUNCTION: token\nLINES: 1-2\nBUG: It leaks.\n")
    assert all(place.function.path != "prod_secrets.py" for place in named.places)


DECK = """import random


class Deck:
    def __init__(self):
        self.cards = list(range(52))

    def deal(self):
        return self.cards.pop()
"""


def test_a_method_that_is_not_there_yet_is_a_place_in_its_class(ws):
    (ws.root / "deck.py").write_text(DECK)
    # Qualified with its class: the class.
    found = places(ws, "FILE: deck.py\nFUNCTION: Deck.shuffle\nBUG: it has no shuffle", task="Add shuffle.")
    (place, *_) = found.places
    assert (place.function.kind, place.function.name, place.function.start) == ("class", "Deck", 4)
    assert place.function.source == DECK[DECK.index("class Deck") :] and not found.sure
    # Alone, in a file that defines one class and nothing else: that class.
    found = places(ws, "FILE: deck.py\nFUNCTION: shuffle", task="Add a shuffle method.")
    assert [(p.function.name, p.function.kind) for p in found.places] == [("Deck", "class")]
    # In a file with functions beside its class, a name that is nowhere is no place of its own.
    found = places(ws, "FILE: stats.py\nFUNCTION: average", task="Fix the bug in mean.")
    assert [(p.function.name, p.origin) for p in found.places] == [("mean", "task")]


def test_a_class_the_task_names_is_a_place_when_the_model_is_unsure(ws):
    (ws.root / "deck.py").write_text(DECK)
    found = places(
        ws, "FILE: cards.py\nFUNCTION: shuffle_all", task="Give Deck a shuffle method.", failure=""
    )
    assert [(p.function.name, p.function.kind, p.origin) for p in found.places] == [("Deck", "class", "task")]
    # A method that exists is still the place, not its class.
    found = places(ws, "FILE: deck.py\nFUNCTION: deal", task="Make Deck deal from the top.")
    assert found.sure and [p.function.qualname for p in found.places] == ["Deck.deal"]


async def test_a_workspace_of_one_class_is_asked_where_the_change_goes(tmp_path):
    # One method and its class is not "one function": the task may add a method beside it.
    (tmp_path / "deck.py").write_text(
        DECK.replace("    def deal(self):\n        return self.cards.pop()\n", "")
    )
    source = ScriptedCandidates([["FILE: deck.py\nFUNCTION: Deck.deal\nBUG: missing"]])
    found = await localize(source, Workspace(tmp_path), "Add deal to Deck.", "pytest", "E  AttributeError")
    assert len(source.draws) == 1
    assert [(p.function.name, p.function.kind) for p in found.places] == [("Deck", "class")]


async def test_a_function_the_task_names_is_the_place_without_asking(ws):
    source = ScriptedCandidates([[GOOD]])
    found = await localize(source, ws, "Fix the bug in the function mean in stats.py", "pytest", FAILURE)
    assert source.calls == [] and found.sure and found.generation is None
    (place,) = found.places
    assert (place.function.name, place.origin, place.hypothesis) == ("mean", "task", "")
    # A method by its class, too.
    found = await localize(source, ws, "Counter.bump counts one too many: fix it.", "pytest", FAILURE)
    assert source.calls == [] and [p.function.qualname for p in found.places] == ["Counter.bump"]


async def test_a_file_the_task_names_picks_among_functions_of_one_name(ws):
    (ws.root / "other.py").write_text("def mean(xs):\n    return 0\n")
    source = ScriptedCandidates([[GOOD]])
    found = await localize(source, ws, "Fix the bug in mean in stats.py", "pytest", FAILURE)
    assert source.calls == [] and [(p.function.path, p.function.name) for p in found.places] == [
        ("stats.py", "mean")
    ]


@pytest.mark.parametrize(
    "task",
    [
        "Fix the bug so the tests pass.",  # no function named
        "Fix mean and spread.",  # two
        "Add a function median beside mean.",  # something new: its place is the model's to say
    ],
)
async def test_a_task_that_leaves_the_place_in_doubt_asks_the_model(ws, task):
    source = ScriptedCandidates([[GOOD]])
    found = await localize(source, ws, task, "pytest", FAILURE)
    assert len(source.calls) == 1 and found.reply == GOOD


async def test_a_name_two_files_define_asks_the_model(ws):
    (ws.root / "other.py").write_text("def mean(xs):\n    return 0\n")
    source = ScriptedCandidates([[GOOD]])
    await localize(source, ws, "Fix the bug in mean.", "pytest", FAILURE)
    assert len(source.calls) == 1


async def test_a_name_the_tests_miss_is_asked_for(ws):
    # The task names mean, and the tests fail for want of `median`, which it also names.
    source = ScriptedCandidates([[GOOD]])
    failure = "E   ImportError: cannot import name 'median' from 'stats'"
    await localize(source, ws, "Make median work like mean.", "pytest", failure)
    assert len(source.calls) == 1
