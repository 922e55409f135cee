"""A heal's schedule: named rungs, built by `plan` from the settings, climbed in order by
`Healer.heal` until a candidate passes.

Each rung is one step: a round of the model the heal started with (`Greedy`, `Sampled`), the deep
model's round after an escalation (`Deep`), or rewrites of a localized function (`Repair`,
`DeepRepair`). A rung reads and adds to the `HealState` of the heal in progress, and says None
where it had nothing to do (an escalation refused, nothing localized)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from whiz.modes.heal_results import (
    CandidateResult,
    RoundResult,
    best_failure,
    creates_file,
    feedback,
    told_without_reply,
)
from whiz.modes.pool import Label

if TYPE_CHECKING:
    from whiz.modes.healing import Healer, HealModels, HealSettings


@dataclass
class HealState:
    """One heal in progress: what its rungs ask with, and what they found so far."""

    healer: Healer
    models: HealModels
    messages: list[dict[str, Any]]
    """The conversation the heal starts from."""
    task: str
    first: Label
    """The model answering when the heal started."""
    rounds: list[RoundResult] = field(default_factory=list)
    escalated: bool = False
    """Whether a `Deep` rung moved the heal to the deep model."""

    @property
    def number(self) -> int:
        """The number of the next round."""
        return len(self.rounds) + 1

    @property
    def deep_answers(self) -> bool:
        """Whether the deep model answers now: the heal started with it, or escalated to it."""
        return self.escalated or self.first == Label.DEEP

    def best_failure(self) -> CandidateResult | None:
        return best_failure([r for rnd in self.rounds for r in rnd.results])

    def history(self, *, told: bool) -> list[dict[str, Any]]:
        """The conversation a round draws from: with the best failure so far and what its tests
        said, as the reply and an answer to it, or (`told`) as a note on the task alone."""
        failure = self.best_failure()
        if failure is None:
            return self.messages
        if not told:
            return self.messages + [
                {"role": "assistant", "content": failure.text},
                {"role": "user", "content": feedback(failure, self.healer.test_cmd)},
            ]
        # A model copies a failing reply it can see, so a told round sees only what the tests
        # said. Where nothing ran, or the failure wrote a new file, there is nothing in the tests'
        # words for it to use: it draws from the task as given.
        if failure.status in ("failed", "timeout") and not creates_file(failure):
            return told_without_reply(self.messages, failure, self.healer.test_cmd)
        return self.messages

    async def round(
        self, label: Label, n: int, *, greedy: bool = False, seed: int | None = None, told: bool = False
    ) -> RoundResult:
        """A round of `n` candidates of `label`'s model (`Healer.round`)."""
        history = self.history(told=told)
        source = await self.models.candidates(label)
        return await self.healer.round(source, history, self.number, label, n=n, greedy=greedy, seed=seed)


class Rung(Protocol):
    """One step of a heal."""

    async def run(self, heal: HealState) -> RoundResult | None:
        """This rung's round, or None where it had nothing to do."""
        ...


@dataclass(frozen=True)
class Greedy:
    """The most likely reply of the model the heal started with: the one candidate most likely to
    be right, and the cheapest to test first."""

    async def run(self, heal: HealState) -> RoundResult:
        return await heal.round(heal.first, 1, greedy=True, told=True)


@dataclass(frozen=True)
class Sampled:
    """A round of `n` sampled candidates of the model the heal started with."""

    n: int
    seed: int | None = None
    """The first candidate's seed; None: seeded by the round's number (`Healer.round`)."""
    told: bool = False
    """The best failure so far as a note on the task (`HealState.history`); False: fed back."""

    async def run(self, heal: HealState) -> RoundResult:
        return await heal.round(heal.first, self.n, seed=self.seed, told=self.told)


@dataclass(frozen=True)
class Deep:
    """A round of the deep model, once the heal escalates to it (where the mode does: `HealModels.
    escalate`); where it does not, the rung is passed over, and the next deep rung asks again."""

    n: int
    greedy: bool = False
    told: bool = False

    async def run(self, heal: HealState) -> RoundResult | None:
        if not heal.escalated:
            failure = heal.best_failure()
            why = f"best failure: {failure.status}" if failure else "no candidates"
            reason = f"healing found no passing candidate in {len(heal.rounds)} round(s) ({why})"
            heal.escalated = heal.models.escalate(reason, "healing")
            if not heal.escalated:
                return None
        return await heal.round(Label.DEEP, self.n, greedy=self.greedy, told=self.told)


@dataclass(frozen=True)
class Repair:
    """Localize, then `n` rewrites of the function found (`Healer.repair`), from what the tests
    said before the heal; where nothing is localized, `otherwise` runs in its place."""

    n: int
    failure: str
    otherwise: Rung

    async def run(self, heal: HealState) -> RoundResult | None:
        stage = await heal.healer.repair(heal.models, heal.task, self.failure, n=self.n, number=heal.number)
        return stage if stage is not None else await self.otherwise.run(heal)


@dataclass(frozen=True)
class Mutants:
    """The localized places' one-token changes, tested without a model (`Healer.mutate`): a
    comparison's bound, a constant off by one, `and` for `or`. Passed over where nothing is
    localized yet, or the task writes a new file."""

    async def run(self, heal: HealState) -> RoundResult | None:
        if heal.healer.writes_new_file(heal.rounds):
            return None
        return await heal.healer.mutate(heal.number, heal.models.current)


@dataclass(frozen=True)
class Forced:
    """Rewrites of the places a first look wrote back unchanged, each made to change one of the
    function's statements (`Healer.force`). Passed over where there are none, or the task writes
    a new file."""

    async def run(self, heal: HealState) -> RoundResult | None:
        if heal.healer.writes_new_file(heal.rounds):
            return None
        return await heal.healer.force(heal.models, heal.number)


@dataclass(frozen=True)
class DeepRepair:
    """Where the deep model answers on code that exists, `n` rewrites of the localized function in
    place of `otherwise`, told what the tests said about the closest edit or the code as it is
    (`Healer.evidence`). Rewrites pass where sampled edits of the whole task mostly repeat the
    greedy edit; a new program varies more from sample to sample, so it keeps `otherwise`. Where
    nothing is localized, `unfound` runs (None: the rung is passed over)."""

    n: int
    otherwise: Rung
    unfound: Rung | None = None
    first_look: bool = False
    """End at a draw that writes the function back unchanged, so the rung after it (the mutants)
    runs before the heal asks what is wrong there (`Healer.repair`)."""

    async def run(self, heal: HealState) -> RoundResult | None:
        if not heal.deep_answers or heal.healer.writes_new_file(heal.rounds):
            return await self.otherwise.run(heal)
        output, earlier = await heal.healer.evidence(heal.rounds)
        stage = await heal.healer.repair(
            heal.models,
            heal.task,
            output,
            n=self.n,
            earlier=earlier,
            number=heal.number,
            first_look=self.first_look,
        )
        if stage is None and self.unfound is not None:
            return await self.unfound.run(heal)
        return stage


def plan(settings: HealSettings, first: Label, failure: str = "") -> list[Rung]:
    """The rungs of a heal that starts with `first`'s model; `failure`, the tests' output on the code
    as it is, lets a heal with `localize` begin with a repair."""
    return ladder(settings, first) if settings.ladder else rounds(settings, first, failure)


def rounds(settings: HealSettings, first: Label, failure: str = "") -> list[Rung]:
    """`rounds` rounds of n, each fed the best failure so far, then `deep_rounds` of the deep model
    (none where the heal starts with it: there is no deeper one). With `localize` and a failure,
    a repair stands for the first round."""
    n = settings.n
    rungs: list[Rung] = [Sampled(n) for _ in range(settings.rounds)]
    if first != Label.DEEP:
        rungs += [Deep(n) for _ in range(settings.deep_rounds)]
    if settings.localize and failure:
        rungs[0] = Repair(n, failure, otherwise=rungs[0])
        if settings.mutants:
            rungs.insert(1, Mutants())
    return rungs


def ladder(settings: HealSettings, first: Label) -> list[Rung]:
    """Cheapest first, one candidate after another (`HealSettings.ladder`): the first model's most
    likely reply, the deep model's, then the rest of n. A heal that starts with the deep model has no
    deep rung (its greedy reply was the first); that rung's candidate goes to the rung after it,
    where there is one. The samples are seeded as a first round, so they are the same draws
    whichever rungs ran before them.

    The rungs the deep model answers on code that exists are rewrites (`DeepRepair`). Where nothing
    is localized after an escalation, the first model's samples are passed over: on code that exists
    they rarely mend what the deep model's greedy reply did not.

    With `mutants`, a deep-started ladder tests the localized function's one-token changes right
    after its greedy rewrite (seconds, no model), before the sampled rewrites (a minute); one
    that starts with the fast model, after its rewrites, which are what localize it. Where that
    greedy rewrite writes the function back unchanged (the model sees nothing wrong), the mutants
    come before the heal asks what is wrong, not after it and its draws (`first_look`), and
    where they fail, with `forced`, rewrites made to change one statement each (`Forced`)."""
    n, seed = settings.n, settings.seed
    mutated: list[Rung] = [Mutants()] if settings.mutants else []
    if first == Label.DEEP:
        # A first look only where a repair rung after the mutants asks what is wrong.
        first = DeepRepair(1, otherwise=Greedy(), unfound=Greedy(), first_look=bool(mutated) and n > 2)
        rungs: list[Rung] = [first, *mutated]
        if settings.forced and n > 2:
            rungs.append(Forced())  # only where the first look wrote the function back
        if n > 2:
            sampled = Sampled(n - 1, seed=seed, told=True)
            rungs.append(DeepRepair(n - 1, otherwise=sampled, unfound=sampled))
        return rungs
    rungs = [Greedy()]
    if n > 1:
        rungs.append(Deep(1, greedy=True, told=True))
    if n > 2:
        rungs.append(DeepRepair(n - 2, otherwise=Sampled(n - 2, seed=seed, told=True)))
        rungs += mutated  # the deep model's rewrites localized the places, where they ran
    return rungs
