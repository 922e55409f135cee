"""A heal's plan and each of its rungs alone, against a stand-in healer that records what it is
asked: which model, how many candidates, from which conversation, and when a rung steps aside."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from whiz.modes.candidates import Generation
from whiz.modes.heal_plan import Deep, DeepRepair, Forced, Greedy, HealState, Mutants, Repair, Sampled, plan
from whiz.modes.heal_results import CandidateResult, RoundResult
from whiz.modes.healing import HealSettings
from whiz.modes.pool import Label

FAST, DEEP = Label.FAST, Label.DEEP
MESSAGES = [{"role": "system", "content": "rules"}, {"role": "user", "content": "Fix average in calc.py"}]


def failed(text="calc.py edit", status="failed", output="AssertionError: 0 != 3") -> CandidateResult:
    return CandidateResult(1, 0, text, 5, status, exit_code=1, test_output=output, failure=output)


def round_of(number: int, label: Label, *results: CandidateResult) -> RoundResult:
    return RoundResult(number, label, Generation([], [], 0.0, "scripted"), list(results))


@dataclass
class Healer:
    """Records rounds and repairs; a repair finds a function unless `localizes` is False."""

    localizes: bool = True
    new_file: bool = False
    test_cmd: str = "python check.py"
    asked: list[tuple] = field(default_factory=list)

    async def round(self, source, history, number, label, *, n, greedy, seed) -> RoundResult:
        self.asked.append(("round", label, number, n, greedy, seed, source, history))
        return round_of(number, label, failed())

    async def repair(self, models, task, failure, *, n, number, earlier=False, first_look=False):
        self.asked.append(("repair", models.current, number, n, failure, earlier))
        return round_of(number, models.current, failed()) if self.localizes else None

    async def evidence(self, rounds):
        return "the closest edit's output", True

    def writes_new_file(self, rounds) -> bool:
        return self.new_file


@dataclass
class Models:
    current: Label = FAST
    grants: bool = True
    escalations: list[str] = field(default_factory=list)

    async def candidates(self, label=None):
        return f"{label or self.current} source"

    def escalate(self, reason, trigger):
        self.escalations.append(reason)
        if self.grants:
            self.current = DEEP
        return self.grants


def state(first=FAST, *rounds, grants=True, escalated=False, **healer) -> HealState:
    models = Models(DEEP if escalated else first, grants)
    return HealState(
        Healer(**healer), models, MESSAGES, "Fix average in calc.py", first, list(rounds), escalated
    )


async def run(rung, heal: HealState):
    return await rung.run(heal)


# -- the plan --------------------------------------------------------------------------------------


def test_plain_rounds_are_the_first_models_then_the_deep_models():
    assert plan(HealSettings(n=3, rounds=2, deep_rounds=1), FAST) == [Sampled(3), Sampled(3), Deep(3)]


def test_a_heal_that_starts_deep_has_no_deep_rounds():
    assert plan(HealSettings(n=3, rounds=2, deep_rounds=2), DEEP) == [Sampled(3), Sampled(3)]


def test_a_failure_before_a_localized_heal_makes_its_first_round_a_repair():
    settings = HealSettings(n=3, rounds=2, localize=True)
    assert plan(settings, FAST, "AssertionError") == [
        Repair(3, "AssertionError", otherwise=Sampled(3)),
        Mutants(),
        Sampled(3),
        Deep(3),
    ]
    no_mutants = HealSettings(n=3, rounds=2, localize=True, mutants=False)
    assert Mutants() not in plan(no_mutants, FAST, "AssertionError")
    assert plan(settings, FAST, "") == [Sampled(3), Sampled(3), Deep(3)]
    assert plan(HealSettings(n=3, ladder=True, localize=True), FAST, "AssertionError")[0] == Greedy()


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, [Greedy()]),
        (2, [Greedy(), Deep(1, greedy=True, told=True)]),
        (
            5,
            [
                Greedy(),
                Deep(1, greedy=True, told=True),
                DeepRepair(3, otherwise=Sampled(3, seed=9, told=True)),
                Mutants(),
            ],
        ),
    ],
)
def test_a_ladder_climbs_greedy_replies_then_the_rest_of_n(n, expected):
    assert plan(HealSettings(n=n, ladder=True, seed=9), FAST) == expected


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, [DeepRepair(1, otherwise=Greedy(), unfound=Greedy()), Mutants()]),
        (2, [DeepRepair(1, otherwise=Greedy(), unfound=Greedy()), Mutants()]),
        (5, [
            DeepRepair(1, otherwise=Greedy(), unfound=Greedy(), first_look=True),
            Mutants(),
            Forced(),
            DeepRepair(4, otherwise=Sampled(4, seed=9, told=True), unfound=Sampled(4, seed=9, told=True)),
        ]),
    ],
)  # fmt: skip
def test_a_ladder_that_starts_deep_gives_its_deep_rungs_candidate_to_the_last(n, expected):
    assert plan(HealSettings(n=n, ladder=True, seed=9), DEEP) == expected


# -- each rung -------------------------------------------------------------------------------------


async def test_greedy_asks_the_first_model_for_its_most_likely_reply_to_the_task():
    heal = state(FAST)
    result = await run(Greedy(), heal)
    assert result is not None and result.round == 1
    assert heal.healer.asked == [("round", FAST, 1, 1, True, None, "fast source", MESSAGES)]


async def test_sampled_feeds_back_the_best_failure_as_the_reply_and_what_its_tests_said():
    heal = state(FAST, round_of(1, FAST, failed("the failing edit")))
    await run(Sampled(3), heal)
    (_, label, number, n, greedy, seed, source, history) = heal.healer.asked[0]
    assert (label, number, n, greedy, seed, source) == (FAST, 2, 3, False, None, "fast source")
    assert history[:2] == MESSAGES and history[2] == {"role": "assistant", "content": "the failing edit"}
    assert "AssertionError" in history[3]["content"]


async def test_a_told_round_hears_what_the_tests_said_without_the_failing_reply():
    heal = state(FAST, round_of(1, FAST, failed("the failing edit")))
    await run(Sampled(2, seed=9, told=True), heal)
    history = heal.healer.asked[0][-1]
    assert len(history) == len(MESSAGES) and "the failing edit" not in str(history)
    assert (
        "An earlier edit was tried" in history[-1]["content"] and "AssertionError" in history[-1]["content"]
    )
    assert heal.healer.asked[0][5] == 9


async def test_a_told_round_draws_from_the_task_where_the_failure_says_nothing_it_could_use():
    malformed = failed(status="malformed", output="")
    heal = state(FAST, round_of(1, FAST, malformed))
    await run(Sampled(2, told=True), heal)
    assert heal.healer.asked[0][-1] == MESSAGES


async def test_deep_escalates_once_and_asks_the_deep_model():
    heal = state(FAST, round_of(1, FAST, failed()))
    first = await run(Deep(2), heal)
    second = await run(Deep(2), heal)
    assert heal.escalated and len(heal.models.escalations) == 1
    assert "no passing candidate in 1 round(s) (best failure: failed)" in heal.models.escalations[0]
    assert first is not None and second is not None and first.mode == second.mode == DEEP
    assert [(a[1], a[6]) for a in heal.healer.asked] == [(DEEP, "deep source")] * 2


async def test_deep_is_passed_over_where_the_mode_does_not_escalate_and_asks_again_next_time():
    heal = state(FAST, grants=False)
    assert await run(Deep(2), heal) is None
    assert await run(Deep(2), heal) is None
    assert not heal.escalated and len(heal.models.escalations) == 2 and heal.healer.asked == []
    assert "(no candidates)" in heal.models.escalations[0]


async def test_repair_rewrites_the_localized_function_from_the_failure_given():
    heal = state(FAST)
    result = await run(Repair(3, "AssertionError", otherwise=Sampled(3)), heal)
    assert result is not None
    assert heal.healer.asked == [("repair", FAST, 1, 3, "AssertionError", False)]


async def test_repair_that_localizes_nothing_runs_the_round_it_stands_for():
    heal = state(FAST, localizes=False)
    await run(Repair(3, "AssertionError", otherwise=Sampled(3)), heal)
    assert [a[0] for a in heal.healer.asked] == ["repair", "round"]
    assert heal.healer.asked[1][:4] == ("round", FAST, 1, 3)


async def test_deep_repair_steps_aside_where_the_first_model_still_answers():
    heal = state(FAST, grants=False)
    await run(DeepRepair(2, otherwise=Sampled(2, told=True)), heal)
    assert [a[0] for a in heal.healer.asked] == ["round"]


async def test_deep_repair_steps_aside_for_a_new_file():
    heal = state(FAST, escalated=True, new_file=True)
    await run(DeepRepair(2, otherwise=Sampled(2, told=True)), heal)
    assert [a[:2] for a in heal.healer.asked] == [("round", FAST)]


async def test_deep_repair_after_an_escalation_is_told_about_the_closest_edit():
    heal = state(FAST, round_of(1, FAST), round_of(2, DEEP), escalated=True)
    result = await run(DeepRepair(2, otherwise=Sampled(2)), heal)
    assert result is not None
    assert heal.healer.asked == [("repair", DEEP, 3, 2, "the closest edit's output", True)]


async def test_deep_repair_that_localizes_nothing_runs_unfound_or_nothing():
    heal = state(FAST, escalated=True, localizes=False)
    assert await run(DeepRepair(2, otherwise=Sampled(2)), heal) is None
    assert [a[0] for a in heal.healer.asked] == ["repair"]
    heal = state(DEEP, localizes=False)
    assert await run(DeepRepair(1, otherwise=Greedy(), unfound=Greedy()), heal) is not None
    assert [a[:2] for a in heal.healer.asked] == [("repair", DEEP), ("round", DEEP)]
