"""Diagnosis before repair: where a rewrite wrote its function back unchanged, several hypotheses
of what is wrong are drawn together (`HealSettings.hypotheses`), and the place's later draws try
them in turn, so the checks choose among causes, not among copies of one guess."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.project.test_files import TestFiles
from whiz.agent.project.workspace import Workspace
from whiz.modes.candidates import ScriptedCandidates
from whiz.modes.localize import Localization, definition_index
from whiz.modes.repair import Brief, RepairPlan, explain

CODE = "def chunk(items, size):\n    return [items[i:i + size] for i in range(0, len(items) - size, size)]\n"


def place(tmp_path: Path) -> Localization:
    (tmp_path / "solution.py").write_text(CODE)
    (fn,) = [f for f in definition_index(Workspace(tmp_path), TestFiles("")) if f.name == "chunk"]
    return Localization(fn, "")


async def test_several_hypotheses_are_drawn_together_and_repeats_dropped(tmp_path):
    source = ScriptedCandidates(
        [
            [
                "BUG: the range stops one chunk early",
                "BUG: the range stops one chunk early",
                "BUG: size is not checked",
                "def chunk(): ...",
            ]
        ]
    )
    said, _ = await explain(source, place(tmp_path), Brief("Fix chunk", "true"), seed=7, n=4)
    assert said == ["the range stops one chunk early", "size is not checked"]
    (draw,) = source.draws
    assert draw.n == 4 and draw.temperature > 0  # sampled, so that they differ


def test_the_places_told_draws_take_the_hypotheses_in_turn(tmp_path):
    plan = RepairPlan([place(tmp_path)], n=6, seed=1)
    plan.explain(0, ["the range stops early", "size is ignored", "items are copied"])
    told = [a.place.hypothesis for a in plan.attempts(6) if a.hypothesis]
    assert told == ["the range stops early", "size is ignored", "items are copied"]


def test_one_hypothesis_is_the_most_likely_answer_as_before(tmp_path):
    plan = RepairPlan([place(tmp_path)], n=4, seed=1)
    plan.explain(0, ["the range stops early"])
    assert {a.place.hypothesis for a in plan.attempts(4) if a.hypothesis} == {"the range stops early"}
