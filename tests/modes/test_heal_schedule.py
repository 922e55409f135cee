"""The schedule a heal follows for each combination of its settings: which model is asked, for how
many candidates, drawn how, from which conversation, and in what order; where escalation is
refused, where the first model is the deep one, where the task writes a new file, where
localization finds nothing, and where a candidate passes midway."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from whiz.agent.events import Collector
from whiz.agent.project.workspace import Workspace
from whiz.modes.candidates import CandidateStream, Draw, ScriptedCandidates
from whiz.modes.healing import Healer, HealSettings
from whiz.modes.notices import ItemEmitter
from whiz.modes.pool import Label

CODE = "def average(xs):\n    return sum(xs) / (len(xs) + 1)\n"
HELPER = "\n\ndef helper(x):\n    return x\n"
# Passes once calc.py returns the string 'ok': candidate k writes `return k`, or 'ok' where it is
# the one chosen to pass.
CHECK = "grep -q \"'ok'\" calc.py\n"
TEST_CMD = "sh check.sh"
FIX_TASK = "Fix the bug in calc.py"  # names no function: the model is asked where it is
NEW_TASK = "Write wc.py that counts words"


@dataclass
class Models:
    """A `HealModels` that records what it is asked: each source's calls, and every escalation."""

    current: Label
    grants: bool = True
    passing: int | None = None
    """The number of the candidate (counted over the whole heal, from 0) that passes."""
    trace: list[tuple] = field(default_factory=list)
    escalations: int = 0
    messages: list[dict] = field(default_factory=list)
    _count: itertools.count = field(default_factory=itertools.count)

    async def candidates(self, label: Label | None = None) -> Recorded:
        return Recorded(self, label or self.current)

    def escalate(self, reason: str, trigger: str) -> bool:
        self.escalations += 1
        self.trace.append(("escalate", self.grants))
        if self.grants and self.current != Label.DEEP:
            self.current = Label.DEEP
            return True
        return False

    def reply(self) -> str:
        k = next(self._count)
        value = "'ok'" if k == self.passing else str(k)
        return f"```python\ndef average(xs):\n    return {value}\n```"


@dataclass
class Recorded:
    models: Models
    label: Label

    def stream(self, messages, draw: Draw) -> CandidateStream:
        self.models.trace.append(
            (self.label, *shape(draw), conversation(self.models.messages, messages, draw))
        )
        return ScriptedCandidates([[self.models.reply() for _ in range(draw.n)]]).stream(messages, draw)


def shape(draw: Draw) -> tuple:
    return draw.n, draw.greedy_first, draw.seed


def conversation(given: list[dict], sent: list[dict], draw: Draw) -> str:
    """Which conversation a request was: the heal's own, told what an earlier edit's tests said,
    the failing reply fed back, a localization or a rewrite of a function."""
    last = sent[-1]["content"] if sent else ""
    if "Where is the bug?" in last:
        return "localize"
    if draw.prediction is not None:
        return "rewrite"
    if sent == given:
        return "task"
    if len(sent) == len(given) + 2 and sent[-2]["role"] == "assistant":
        return "fed back"
    if len(sent) == len(given) and "An earlier edit was tried" in last:
        return "told"
    return f"other: {last[:60]!r}"


def heal(
    tmp_path: Path,
    first: Label = Label.FAST,
    *,
    grants: bool = True,
    task: str = FIX_TASK,
    passing: int | None = None,
    failure: str = "",
    helper: bool = False,
    **settings,
):
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text(CODE + (HELPER if helper else ""))
    (root / "check.sh").write_text(CHECK)
    collector = Collector()
    emit = ItemEmitter(collector)
    healer = Healer(
        Workspace(root),
        TEST_CMD,
        HealSettings(**{"n": 4, "test_timeout_s": 20, "mutants": False, **settings}),
        emit=emit,
    )
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": task}]
    models = Models(first, grants, passing, messages=messages)
    outcome = asyncio.run(healer.heal(models, messages, task, failure=failure))
    rounds = [(i["round"], i["mode"], i["n"], i.get("localized", False)) for i in collector.items("heal")]
    return models.trace, rounds, outcome


FAST, DEEP = Label.FAST, Label.DEEP

PLAIN = [
    # rounds of n, the best failure fed back, then the deep model's after escalation
    (dict(), [
        (FAST, 4, False, None, "task"), (FAST, 4, False, None, "fed back"),
        ("escalate", True), (DEEP, 4, False, None, "fed back"),
    ]),
    (dict(grants=False, deep_rounds=2), [
        (FAST, 4, False, None, "task"), (FAST, 4, False, None, "fed back"),
        ("escalate", False), ("escalate", False),
    ]),
    (dict(deep_rounds=2, rounds=1, n=2), [
        (FAST, 2, False, None, "task"), ("escalate", True),
        (DEEP, 2, False, None, "fed back"), (DEEP, 2, False, None, "fed back"),
    ]),
    # a heal that starts with the deep model has no deep rounds of its own
    (dict(first=DEEP), [(DEEP, 4, False, None, "task"), (DEEP, 4, False, None, "fed back")]),
    (dict(passing=5), [(FAST, 4, False, None, "task"), (FAST, 4, False, None, "fed back")]),
]  # fmt: skip


@pytest.mark.parametrize(("given", "expected"), PLAIN)
def test_plain_rounds_follow_their_schedule(tmp_path, given, expected):
    trace, _, _ = heal(tmp_path, **given, seed=None)
    assert trace == expected


def test_rounds_are_numbered_and_seeded_by_their_number(tmp_path):
    trace, rounds, outcome = heal(tmp_path, seed=10)
    assert [t[3] for t in trace if t[0] != "escalate"] == [10, 1010, 2010]
    assert rounds == [(1, "fast", 4, False), (2, "fast", 4, False), (3, "deep", 4, False)]
    assert outcome.best is None and outcome.escalated


LOCALIZED = [
    # the repair stage stands for the first round
    (dict(), [
        (FAST, 1, False, 10, "rewrite"), (FAST, 1, False, 11, "rewrite"),
        (FAST, 1, False, 12, "rewrite"), (FAST, 1, False, 13, "rewrite"),
        (FAST, 4, False, 1010, "fed back"), ("escalate", True), (DEEP, 4, False, 2010, "fed back"),
    ], [(1, "fast", 4, True), (2, "fast", 4, False), (3, "deep", 4, False)]),
    # nothing localized: plain rounds only
    (dict(helper=True), [
        (FAST, 1, False, 10, "localize"), (FAST, 4, False, 10, "task"),
        (FAST, 4, False, 1010, "fed back"), ("escalate", True), (DEEP, 4, False, 2010, "fed back"),
    ], [(1, "fast", 4, False), (2, "fast", 4, False), (3, "deep", 4, False)]),
    # a passing rewrite ends the heal
    (dict(passing=1), [
        (FAST, 1, False, 10, "rewrite"), (FAST, 1, False, 11, "rewrite"),
        (FAST, 1, False, 12, "rewrite"), (FAST, 1, False, 13, "rewrite"),
    ], [(1, "fast", 4, True)]),
]  # fmt: skip


@pytest.mark.parametrize(("given", "expected", "rounds"), LOCALIZED)
def test_a_localized_heal_repairs_first(tmp_path, given, expected, rounds):
    trace, shown, outcome = heal(tmp_path, **given, localize=True, failure="AssertionError", seed=10)
    assert trace == expected
    assert shown == rounds
    assert outcome.escalated == (("escalate", True) in trace)


LADDER = [
    # greedy first model, greedy deep model, then the deep model's rewrites on code that exists
    (dict(), [
        (FAST, 1, True, 7, "task"), ("escalate", True), (DEEP, 1, True, 1007, "told"),
        (DEEP, 1, False, 7, "rewrite"), (DEEP, 1, False, 8, "rewrite"),
    ], [(1, "fast", 1, False), (2, "deep", 1, False), (3, "deep", 2, True)]),
    # a new file: the first model's samples instead
    (dict(task=NEW_TASK), [
        (FAST, 1, True, 7, "task"), ("escalate", True), (DEEP, 1, True, 1007, "told"),
        (FAST, 2, False, 7, "told"),
    ], [(1, "fast", 1, False), (2, "deep", 1, False), (3, "fast", 2, False)]),
    # no escalation: the first model's samples
    (dict(grants=False), [
        (FAST, 1, True, 7, "task"), ("escalate", False), (FAST, 2, False, 7, "told"),
    ], [(1, "fast", 1, False), (2, "fast", 2, False)]),
    # escalated, nothing localized: the samples are left out
    (dict(helper=True), [
        (FAST, 1, True, 7, "task"), ("escalate", True), (DEEP, 1, True, 1007, "told"),
        (DEEP, 1, False, 7, "localize"),
    ], [(1, "fast", 1, False), (2, "deep", 1, False)]),
    # a heal that starts deep rewrites from its first rung, its deep rung's candidate in its last
    (dict(first=DEEP), [
        (DEEP, 1, False, 7, "rewrite"), (DEEP, 1, False, 7, "rewrite"),
        (DEEP, 1, False, 8, "rewrite"), (DEEP, 1, False, 9, "rewrite"),
    ], [(1, "deep", 1, True), (2, "deep", 3, True)]),
    (dict(first=DEEP, task=NEW_TASK), [(DEEP, 1, True, 7, "task"), (DEEP, 3, False, 7, "told")],
     [(1, "deep", 1, False), (2, "deep", 3, False)]),
    # starting deep, nothing localized: plain rungs
    (dict(first=DEEP, helper=True), [
        (DEEP, 1, False, 7, "localize"), (DEEP, 1, True, 7, "task"),
        (DEEP, 1, False, 7, "localize"), (DEEP, 3, False, 7, "told"),
    ], [(1, "deep", 1, False), (2, "deep", 3, False)]),
    (dict(n=1), [(FAST, 1, True, 7, "task")], [(1, "fast", 1, False)]),
    (dict(n=2), [(FAST, 1, True, 7, "task"), ("escalate", True), (DEEP, 1, True, 1007, "told")],
     [(1, "fast", 1, False), (2, "deep", 1, False)]),
    (dict(n=2, first=DEEP), [(DEEP, 1, False, 7, "rewrite")], [(1, "deep", 1, True)]),
    (dict(passing=1), [(FAST, 1, True, 7, "task"), ("escalate", True), (DEEP, 1, True, 1007, "told")],
     [(1, "fast", 1, False), (2, "deep", 1, False)]),
]  # fmt: skip


@pytest.mark.parametrize(("given", "expected", "rounds"), LADDER)
def test_a_ladder_follows_its_schedule(tmp_path, given, expected, rounds):
    trace, shown, outcome = heal(tmp_path, **given, ladder=True, parallel=False, seed=7)
    assert trace == expected
    assert shown == rounds
    assert outcome.escalated == (("escalate", True) in trace)
    assert (outcome.best is not None) == ("passing" in given)
