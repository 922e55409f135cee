"""Healing: N candidate edits, each tested in its own copy of the workspace, the best one kept.

A round asks the model for N replies at once (decoded in parallel, sharing the prompt's KV
cache: `candidates.py`). As each reply finishes, its edits are parsed and applied in an
isolated copy (`whiz.environments.worktree`), where the test command runs with a timeout, in
parallel with the other copies and with the replies still being written. The best candidate is
the one whose tests pass, then the one with the smallest diff, then the one with the fewest
tokens. By default the first candidate to pass ends the round (waiting for the slowest of N
replies would mostly buy a chance at a smaller diff): the replies still being written, and the
test runs still going, are cancelled (`HealSettings.first_pass`). When
none passes, the best failure's test output goes back to the model for another round; in auto
mode, the last round goes to the deep model. Auto mode's agent steps heal as a ladder instead,
cheapest first (`HealSettings.ladder`). Which rounds a heal has, in which order, is its plan
(`heal_plan.py`).

`Healer` does the rounds and reports every candidate as a `heal_candidate` item. `whiz heal`
(`whiz.commands.heal.heal_task`) applies the winner to the real workspace itself, atomically and undoably;
`heal_step.HealingModel` makes healing a step of the agent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from whiz.agent.context.prompt import CODE_TOKENS, system_prompt, task_message
from whiz.agent.context.test_feedback import count_passed, failure_summary
from whiz.agent.editing.actions import parse_edits
from whiz.agent.editing.definitions import definition_edits
from whiz.agent.editing.edits import (
    EditError,
    aimed,
    apply_changes,
    plan_edits,
    unified_diff,
)
from whiz.agent.errors import WhizAgentError
from whiz.agent.events import Emitter
from whiz.agent.intent import code_without_edit, named_paths
from whiz.agent.project.secret_files import SecretGate
from whiz.agent.project.test_files import TestFiles
from whiz.agent.project.workspace import Workspace
from whiz.agent.repetition import runs_on
from whiz.agent.runs_check import only_check, shown
from whiz.agent.tools import ApplyEdits
from whiz.environments import SandboxOptions, environment_for
from whiz.environments.local import CommandResult, truncate
from whiz.environments.worktree import CopyError, isolated_copy
from whiz.modes.candidates import CandidateSource, CandidateStream, Draw, Generation
from whiz.modes.forced import FORCED, FORCED_S, Forcing, forced_stream, forcings, unmarked
from whiz.modes.heal_plan import HealState, plan
from whiz.modes.heal_results import (
    CandidateResult,
    HealOutcome,
    RoundResult,
    best_failure,
    creates_file,
    diff_size,
    pick_best,
)
from whiz.modes.localize import Localization, Localized, localize, new_function
from whiz.modes.mutants import Mutant, mutant_change, mutants
from whiz.modes.pool import Label
from whiz.modes.repair import (
    Attempt,
    Brief,
    RepairPlan,
    attempt_messages,
    attempts_stream,
    explain,
    function_change,
    normalized,
)
from whiz.modes.round_tests import RoundTests
from whiz.modes.trace import Trace, failing_call, shown_trace, traced

EVIDENCE_TIMEOUT_S = 30.0
"""How long the tests may run on the code as it is, before a repair, only to say what fails."""
TEST_TIME_MARGIN = 10
"""How many times as long as the slowest run of the tests seen a candidate's run may take."""
GUARD_PATIENCE = 3
"""Candidates that pass the tests and break the checks found in the code (`Healer.guard`) a heal
tests before it stops looking for one that passes both and applies the best of them: the checks
may ask what no rewrite of this model gives, and the rest of a ladder would cost minutes."""
HUNG_MARGIN = 2
"""Where the tests hang on the code as it is, a candidate's run may take this many times as long
as the run that was stopped (and never more than the test timeout)."""
MUTANTS = 50
"""The most mutants a heal tests (`Healer.mutate`): past some dozens, a bug is seldom one token.
Where the failing call was traced, those of the lines it ran come first."""
MUTANTS_S = 20.0
"""The longest the mutants' round may take: some dozens of test runs took 30-45 s of a 90 s heal
on missing cases, which no one-token change mends, and the rewrites after them had seconds left.
The lines the failing call ran come first, so the likeliest mutants are tested within it."""
MUTANTS_AT_ONCE = 2
"""Mutants' test runs at once: they come all together, and as many runs as cores finish soonest."""
MADE_FOR_IT = ("mutants", "forced")
"""Rounds whose changes the model did not choose (`Healer.evidence`)."""


@dataclass
class HealSettings:
    """How a heal runs. Every field has the default `whiz heal` uses, but `localize` (on there)."""

    n: int = 5
    temperature: float = 0.7
    max_tokens: int = 1024
    test_timeout_s: float = 120.0
    test_timeout_floor_s: float = 10.0
    """Once a run of the tests has been seen to its end (`Healer.saw_tests`: the baseline, the
    agent's own run, another candidate's), a candidate's run may take ten times as long as the
    slowest of them, and this long at the least, never more than `test_timeout_s`: a candidate
    that loops forever would otherwise hold its round for the whole timeout, however fast the
    tests are."""
    rounds: int = 2
    """Rounds with the mode's own model: the first, then one per best failure fed back."""
    deep_rounds: int = 1
    """Rounds with the deep model after auto mode escalates."""
    parallel: bool = True
    """Decode the N candidates together (one request with n); False: one after another."""
    ladder: bool = False
    """Cheapest first, each rung ended by the first candidate to pass: the model's most likely
    reply (temperature 0), then, where the mode escalates, the deep model's, then the other n-2
    candidates: on code that exists, rewrites of the function the deep model localizes; for a
    task that writes a new file, samples of the first model (`heal_plan.ladder`). The later rungs
    see the task, and what a failing edit's tests said, but not the failing reply. Auto mode's
    healing step (`session.ladder`); off: `rounds` rounds of n, then `deep_rounds` of the deep
    model's (`heal_plan.rounds`)."""
    seed: int | None = 1234
    """Candidate i samples with seed + i, so a heal can be repeated; None for fresh randomness."""
    max_parallel_tests: int | None = None
    """Test runs at once (default: all candidates)."""
    first_pass: bool = True
    """The first candidate to pass its tests ends the round, and the candidates still being
    written are cancelled; False: every candidate finishes and the smallest passing diff wins."""
    localize: bool = False
    """Where the tests fail before the heal: first ask where the bug is (`localize.py`), then draw
    n rewrites of the function found (`repair.py`) as the first round; a later round (`rounds`)
    is a plain one. Nothing found: plain rounds only. `whiz heal` and `whiz bench heal` turn it
    on; the agent's heal step leaves it off and repairs on its ladder's deep rungs (`ladder`),
    running the tests first where no edit was tested yet."""

    budget_s: float | None = 90.0
    """Once this long has passed since the heal began, it starts no further rung, and a repair
    stage draws no more: a bug not fixed by then is seldom fixed by more draws of the same
    models, and the turn ends with what it has within seconds, not minutes later. A draw still
    being written then is given up (`RoundTests.deadline`), but for the heal's first, and the
    tests already under way finish. None: no bound."""

    mutants: bool = True
    """Test the localized function's one-token changes (`mutants.py`: a comparison's bound, a
    constant off by one, `and` for `or`, ...) after the first rewrite fails: some dozens of test
    runs, no model call, often seconds where sampled rewrites take a minute (`heal_plan.Mutants`)."""

    forced: bool = True
    """Where a first look wrote the localized function back unchanged and no mutant passed, draw
    rewrites begun for the model, each up to one of the function's statements and a comment that
    a fix goes there (`forced.py`): told only that the code is wrong, a small model that sees
    nothing wrong writes it back draw after draw; made to change a line, it changes one."""

    trace: bool = True
    """Run the localized function once more on the arguments a failing check gave it, traced line
    by line (`trace.py`): its mutants are tried on the lines that call ran first, and a repair
    stage after the heal's first is shown what each line did. The first rewrite goes without it:
    most bugs are fixed there, and a trace is a run and a few hundred tokens of every later
    prompt."""

    hypotheses: int = 1
    """Where a rewrite wrote its place back unchanged, how many hypotheses of what is wrong there
    are drawn together (`repair.explain`): 1, the most likely; more, sampled, for the place's
    later draws to try in turn (diagnosis before repair: the failures left were wrong causes)."""

    sandbox: SandboxOptions = field(default_factory=SandboxOptions)
    """Where a candidate's tests may write and reach: its own copy only, by default."""
    allow_test_edits: bool = False
    """Let a candidate change the test files (`test_files.TestFiles`). Off: the tests decide, so a
    candidate's changes to them are left out, and one that changed nothing else is rejected
    (`tests_changed`) however its run would end."""

    MAX_N: ClassVar[int] = 16
    """The most candidates a round decodes: the one bound for `whiz heal -n`, `--heal` and the web
    app's heal (a server may allow fewer: its slots)."""


class HealModels(Protocol):
    """What healing needs from the models: where candidates come from, and a say when a stage finds
    none that passes. A session's `ModeRouter` is one; the web app's heal has a one-model stand-in."""

    current: Label
    """The model that answers now: the first stage's candidates come from it."""

    async def candidates(self, label: Label | None = None) -> CandidateSource:
        """The candidate source of `label` (default: the current model)."""
        ...

    def escalate(self, reason: str, trigger: str) -> bool:
        """Healing failed with the current model: True when a deeper model takes the next stage."""
        ...


class Healer:
    """Runs heal rounds on one workspace with one test command, reporting through `emit`."""

    def __init__(
        self, workspace: Workspace, test_cmd: str, settings: HealSettings | None = None, *, emit: Emitter
    ):
        self.ws = workspace
        self.test_cmd = test_cmd
        self.settings = settings or HealSettings()
        self.emit = emit
        self._listing: list[str] | None = None
        self._tests = TestFiles(test_cmd)
        self._task = ""
        self._restore: Callable[[str], str] | None = None
        """Puts back what the messages left out of a reply (`Hollow.restore`), before it is read."""
        self._tests_took: float | None = None
        self._hung_s: float | None = None
        """How long a run of the tests on the code as it is went on before it was stopped."""
        self._tested: dict[tuple, CandidateResult] = {}
        """Every change tested in this heal, by `repair.change_key`: a later one is not run again."""
        self._explained: dict[tuple[str, str], str] = {}
        """Hypotheses found after a write-back (`repair.explain`), by place (path, qualname): a
        later repair stage of this heal that finds the place with none is given it."""
        self._written_back: set[tuple[str, str]] = set()
        """Places (path, qualname) a first look of this heal wrote back unchanged, unexplained
        (`repair`'s `first_look`): the next repair stage asks what is wrong there before its first
        draw, since its most likely reply would write them back again."""
        self._asked: dict[tuple[str, str], list[dict[str, Any]]] = {}
        """Each place's first rewrite's conversation in this heal, by (path, qualname): a forced
        draw of it is begun there (`force`), where the server has it cached."""
        self._places: list[Localization] = []
        """The places this heal's last localization found: where its mutants are made (`mutate`)."""
        self._localized: dict[Label, str] = {}
        """Each model's last localization answer in this heal: a later stage's request predicts it."""
        self.failing_now: str | None = None
        """What the tests said on the code as it is, where the caller ran them this turn already
        (the found checks' first run, `found_turn.py`): a repair starts from it instead of running
        them once more. None: run them."""
        self._new = ""
        """The new function this heal's task asks for (`localize.new_function`), once a failure said
        it is missing: a later stage hears what an earlier rewrite's tests said, which need not."""
        self.guard: str | None = None
        """The checks the code already holds (`found_turn.py`, as a command), run beside the test
        command: a candidate that passes the tests and fails them is no pass (`checks_failed`), and
        is applied only where no candidate passes both (`HealOutcome.best`)."""
        self._broke_checks = 0
        """Candidates of this heal that passed the tests and broke the guard (`GUARD_PATIENCE`)."""
        self._ends = math.inf
        """When the heal under way runs out of time (`HealSettings.budget_s`)."""
        self._draws = 0
        """Draws (rounds, a repair stage's draws, mutants) started in the heal under way."""
        self._traces: dict[tuple[str, str, str], Trace | None] = {}
        """Each call traced in this heal (`trace`), by place and call: the code it ran is unchanged."""
        self._said_now = ""
        """What the tests said of the code as it is (the heal's `failure`, else what its first repair
        stage heard): the call traced comes from it, since an earlier rewrite's failure may be of a
        call the code as it is gets right."""

    def saw_tests(self, seconds: float) -> None:
        """A run of the test command that ended by itself took `seconds` (see `test_timeout_s`)."""
        self._tests_took = max(self._tests_took or 0.0, seconds)

    def test_timeout_s(self) -> float:
        """How long a candidate's tests may run (`HealSettings.test_timeout_floor_s`)."""
        s = self.settings
        if self._tests_took is None and self._hung_s is not None:
            # Tests that hang on the code as it is: a candidate that does not end them soon
            # hangs them too, and would hold its round for the whole timeout.
            return min(s.test_timeout_s, HUNG_MARGIN * self._hung_s)
        if self._tests_took is None:
            return s.test_timeout_s
        return min(s.test_timeout_s, max(s.test_timeout_floor_s, TEST_TIME_MARGIN * self._tests_took))

    async def heal(
        self,
        models: HealModels,
        messages: list[dict[str, Any]],
        task: str = "",
        *,
        restore: Callable[[str], str] | None = None,
        failure: str = "",
    ) -> HealOutcome:
        """The rungs of `heal_plan.plan` in order, until a candidate passes: the current model's
        first, then, where `models` escalates (auto mode), the deep model's. `task`, the turn's
        task as written, says which files a candidate's code without a path is meant for, as it
        does for the agent; `restore` puts back into a candidate what `messages` left out of the
        code (`Hollow.restore`). `failure`, the output of the tests failing now, lets
        `HealSettings.localize` find the function to repair; the repair stage then stands for the
        first round."""
        self._task, self._restore, self._new = task, restore, ""
        self._broke_checks, self._places, self._traces = 0, [], {}
        self._written_back, self._asked = set(), {}
        self._said_now = failure_summary(failure or self.failing_now or "", str(self.ws.root))
        budget = self.settings.budget_s
        self._ends = math.inf if budget is None else time.monotonic() + budget
        self._draws = 0
        try:
            return await self._climb(HealState(self, models, messages, task, models.current), failure)
        finally:
            self._ends = math.inf  # a redraw after the heal has no budget of its own

    async def _climb(self, heal: HealState, failure: str) -> HealOutcome:
        out_of_time = False
        for rung in plan(self.settings, heal.first, failure):
            if heal.rounds and self.out_of_time():
                out_of_time = True
                break
            result = await rung.run(heal)
            if result is None:
                continue
            heal.rounds.append(result)
            if result.best is not None:
                return HealOutcome(heal.rounds, result.best, heal.escalated)
            if self._broke_checks >= GUARD_PATIENCE:
                break
        # Where no candidate kept the checks the code holds, the tests alone decide, as without them.
        kept = pick_best([r for rnd in heal.rounds for r in rnd.results if r.checks_failed], passing=False)
        out_of_time = out_of_time or any(rnd.cut_short for rnd in heal.rounds)
        return HealOutcome(heal.rounds, kept, heal.escalated, out_of_time)

    def out_of_time(self) -> bool:
        """Whether the heal under way has spent its time budget (`HealSettings.budget_s`)."""
        return time.monotonic() >= self._ends

    def _deadline(self) -> float | None:
        """When the heal under way gives up its model calls: the end of its budget, or None (no
        bound) before its first draw, which is let finish so that a heal always has a candidate."""
        return self._ends if self._draws and self._ends < math.inf else None

    def _left_s(self) -> float | None:
        """How long a model call of the heal under way may take (`_deadline`)."""
        deadline = self._deadline()
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    async def repair(
        self,
        models: HealModels,
        task: str,
        failure: str,
        *,
        n: int | None = None,
        earlier: bool = False,
        number: int = 1,
        first_look: bool = False,
    ) -> RoundResult | None:
        """Localize, then repair: draws of rewrites of the function found, until n distinct
        changes were tested (a repeat is not tested, and not counted), one passes, or the draws
        allowed are spent (`repair.RepairPlan`). One round, its candidates numbered across the
        draws. None when localization found no function: the heal goes on with plain rounds.
        `earlier`: `failure` is what the tests said about an earlier edit, not about the code
        as it is (a ladder's greedy replies), and the rewrites are told so. `first_look`: the
        stage ends at a draw that writes its places back unchanged, where the model sees nothing
        wrong, so that what comes next (the mutants: a second, no model) runs before the asking
        what is wrong and the draws after it (ten seconds and more of the deep model); the next
        repair stage asks first (`_written_back`)."""
        s = self.settings
        n = n or s.n
        label = models.current
        source = await models.candidates()
        summary = failure_summary(failure, str(self.ws.root))
        asked = localize(
            source, self.ws, task, self.test_cmd, summary, seed=s.seed, expected=self._localized.get(label)
        )
        try:
            found = await asyncio.wait_for(asked, self._left_s())
        except TimeoutError:  # a model call, given up where the budget ends as a draw is
            item = self.emit.start("heal", round=number, mode=label, n=n, test_cmd=self.test_cmd,
                                   status="in_progress", localized=True)  # fmt: skip
            return self._round_done(item, number, label, joined([]), [], cut_short=True)
        if found.reply:
            self._localized[label] = found.reply
        self.emit.single("localize", **localized_item(found))
        self._places = found.places
        if not found.places:
            return None
        plan = RepairPlan([self._with_explanation(p) for p in found.places], n, s.seed)
        for slot, place in enumerate(plan.places):
            if place.function.where in self._written_back:
                plan.wrote_back(slot)
        item = self.emit.start("heal", round=number, mode=label, n=n, test_cmd=self.test_cmd,
                               status="in_progress", localized=True)  # fmt: skip
        results: list[CandidateResult] = []
        generations: list[Generation] = [found.generation] if found.generation else []
        new = self._new = new_function(task, summary, found.defined) or self._new
        said, note = summary, ""
        if earlier and summary:
            said, note = "", f"An earlier change was tried; the tests failed on it:\n```\n{summary}\n```"
        brief = Brief(task, self.test_cmd, said, note, new)
        if not earlier:
            self._said_now = self._said_now or summary
        if number > 1:
            brief = await self._traced(brief, plan.places[0], self._said_now or summary)
        written_ms = 0.0
        cut_short = False
        for slot in plan.unexplained():  # written back by an earlier stage's first look
            if not await self._explain(source, plan, slot, brief, generations):
                cut_short = True
        while not plan.done() and not cut_short:
            attempts = plan.attempts(n - plan.distinct)
            if not attempts:
                break
            if results and self.out_of_time():
                cut_short = True
                break
            for attempt in attempts:
                self._asked.setdefault(attempt.place.function.where, attempt_messages(attempt, brief))
            tests = self._round_tests(number, len(attempts), plan=self._rewrite(attempts, len(results)))
            tests.offset = len(results)
            generation, batch = await self._test_draw(
                tests, attempts_stream(source, attempts, brief), stop=s.first_pass
            )
            generations.append(generation)
            written_ms += generation.wall_ms
            results += batch
            plan.record(batch)
            if pick_best(batch) is not None or self._broke_checks >= GUARD_PATIENCE:
                break
            if tests.timed_out:
                cut_short = True
                break
            if first_look and plan.unexplained():
                self._written_back |= {plan.places[i].function.where for i in plan.unexplained()}
                break
            for slot in plan.unexplained():
                if not await self._explain(source, plan, slot, brief, generations):
                    cut_short = True
            if cut_short:
                break
            closest = best_failure(results)
            if closest is not None and closest.status in ("failed", "timeout") and closest.failure:
                # Later draws hear what the closest rewrite's tests said (not the rewrite itself:
                # a small model copies what it can see).
                note = f"An earlier rewrite was tried; the tests still failed:\n```\n{closest.failure}\n```"
                if closest.checks_failed:
                    note = f"An earlier rewrite was tried. {closest.failure.rstrip()}"
                brief = dataclasses.replace(brief, note=note)
        generation = joined(generations)
        duplicates = sum(r.status == "duplicate" or r.same_as is not None for r in results)
        return self._round_done(
            item,
            number,
            label,
            generation,
            results,
            duplicates=duplicates,
            candidates_ms=round(written_ms, 1),
            cut_short=cut_short,
        )

    async def mutate(self, number: int, label: Label) -> RoundResult | None:
        """One round of the localized places' mutants (`mutants.py`), tested a few at a time, the
        first to pass ending it: no model is asked. None where nothing is localized, or no mutant
        could be made."""
        made: list[tuple[Localization, Mutant]] = []
        for place in self._places:
            left = MUTANTS - len(made)
            if left <= 0:
                break
            # The lines the failing call ran come first: a change of a line it never runs cannot
            # change what it does.
            ran = await self._ran_lines(place)
            made += [(place, m) for m in mutants(place.function.source, first=ran, limit=left)]
        if not made:
            return None
        item = self.emit.start("heal", round=number, mode=label, n=len(made), test_cmd=self.test_cmd,
                               status="in_progress", mutants=True)  # fmt: skip

        def planned(number: int, index: int, text: str, tokens: int) -> CandidateResult:
            place, mutant = made[index]
            change = mutant_change(self.ws, place, mutant)
            result = CandidateResult(number, index, text, 0, "failed", changes=[change] if change else [])
            return self._planned(result)

        async def produce(stream: CandidateStream) -> None:
            for index, (_, mutant) in enumerate(made):
                stream.write(index, f"```python\n{mutant.source}```")
                stream.finish(index, "stop", 0)

        # Mutants all come at once, so the time budget is heeded between their test runs too.
        tests = self._round_tests(
            number, len(made), plan=planned, at_once=MUTANTS_AT_ONCE, timed=True, within_s=MUTANTS_S
        )
        generation, results = await self._test_draw(
            tests, CandidateStream(len(made), produce, "mutants"), stop=True
        )
        untested = any(r.status == "cancelled" for r in results)
        cut_short = pick_best(results) is None and untested and self.out_of_time()
        return self._round_done(item, number, label, generation, results, cut_short=cut_short)

    async def force(self, models: HealModels, number: int) -> RoundResult | None:
        """One round of forced changes (`forced.py`) of the places a first look wrote back
        unchanged: greedy rewrites each begun with the function up to one of its statements and
        a comment that a fix goes there, the statements the failing call ran first; the first to
        pass ends it. None where the setting is off, no place was written back, or the model's
        server cannot go on from a reply's start (`CandidateSource.continues`)."""
        if not self.settings.forced:
            return None
        source = await models.candidates()
        if getattr(source, "continues", False) is False:
            return None
        made: list[Forcing] = []
        for place in self._places:
            asked = self._asked.get(place.function.where)
            if asked is None or place.function.where not in self._written_back:
                continue
            made += forcings(place, asked, await self._ran_lines(place), limit=FORCED - len(made))
        if not made:
            return None
        label = models.current
        item = self.emit.start("heal", round=number, mode=label, n=len(made), test_cmd=self.test_cmd,
                               status="in_progress", forced=True)  # fmt: skip

        def planned(number: int, index: int, text: str, tokens: int) -> CandidateResult:
            forcing = made[index]
            text = unmarked(text, forcing)
            change = function_change(self.ws, forcing.place, text, self._task)
            if change is None:
                return self._plan(number, index, text, tokens)
            result = CandidateResult(number, index, text, tokens, "failed", changes=[change])
            if normalized(change.path, change.before) == normalized(change.path, change.after):
                # Made to write something at the mark, the model often writes a blank line or a
                # comment and the function as it was: no change to test.
                result.status, result.unchanged = "no_edit", True
                result.error = "it changed only comments or layout"
                return result
            return self._planned(result)

        tests = self._round_tests(number, len(made), plan=planned, within_s=FORCED_S)
        generation, results = await self._test_draw(tests, forced_stream(source, made), stop=True)
        cut_short = tests.timed_out and pick_best(results) is None and self.out_of_time()
        return self._round_done(
            item, number, label, generation, results, candidates_ms=round(generation.wall_ms, 1),
            cut_short=cut_short,
        )  # fmt: skip

    async def _explain(
        self,
        source: CandidateSource,
        plan: RepairPlan,
        slot: int,
        brief: Brief,
        generations: list[Generation],
    ) -> bool:
        """Ask what is wrong in a place a rewrite wrote back unchanged, and tell its later draws
        (`RepairPlan.explain`); the answer is a `localize` item of that place, its generation
        added to `generations`. False where the heal's time budget ended first: the question is
        a model call as a draw is, given up there (but in the heal's first draw)."""
        place = plan.places[slot]
        left = self._left_s()
        if left == 0:
            return False
        asked = explain(source, place, brief, self.settings.seed, self.settings.hypotheses)
        try:
            said, generation = await asyncio.wait_for(asked, left)
        except TimeoutError:
            return False
        generations.append(generation)
        plan.explain(slot, said)
        if said:
            fn = place.function
            self._explained[fn.where] = said[0]
            reply = generation.texts[0] if generation.texts else ""
            places = [dataclasses.replace(place, hypothesis=h) for h in said]
            self.emit.single("localize", **localized_item(Localized(places, True, reply, generation)))
        return True

    def _with_explanation(self, place: Localization) -> Localization:
        """The place with the hypothesis an earlier stage of this heal found for it, where it has none."""
        said = self._explained.get(place.function.where, "")
        return dataclasses.replace(place, hypothesis=said) if said and not place.hypothesis else place

    async def evidence(self, rounds: list[RoundResult]) -> tuple[str, bool]:
        """What the tests say for a repair after the ladder's greedy replies: the closest tested
        edit's output (True: about an earlier edit), or, where no reply had an edit to test (the
        code written back, only the tests changed), the tests' output on the code as it is.
        A mutant is no reply, nor is a forced change (`MADE_FOR_IT`): what its tests said is of a
        change the model did not choose to make, and told
        "an earlier change was tried" with it, the rewrites after a first look that wrote the
        function back lose the failure of the code they are shown."""
        replies = [r for rnd in rounds if rnd.generation.method not in MADE_FOR_IT for r in rnd.results]
        tested = best_failure(replies)
        if tested is not None and tested.status in ("failed", "timeout") and tested.test_output:
            return tested.test_output, True
        if self.failing_now is not None:
            return self.failing_now, False
        now = CandidateResult(0, 0, "", 0, "failed")
        # Only what the tests say is wanted here, and code that hangs them says so soon enough:
        # a whole test timeout spent on that run would hold up the first rewrite.
        await self._test(now, timeout_s=EVIDENCE_TIMEOUT_S)
        if now.status == "timeout":  # `_test` says how long it let them run
            self._hung_s = EVIDENCE_TIMEOUT_S
            return f"{now.test_output}\n(On the code as it is, {now.error}.)", False
        return (now.test_output if now.status == "failed" else ""), False

    def _rewrite(self, attempts: list[Attempt], offset: int) -> Callable[..., CandidateResult]:
        """How a repair draw's candidate becomes an edit: its function put in the old one's place;
        a reply without that function is read as any candidate is (`_plan`)."""

        def plan(number: int, index: int, text: str, tokens: int) -> CandidateResult:
            change = function_change(self.ws, attempts[index - offset].place, text, self._task)
            if change is None:
                return self._plan(number, index, text, tokens)
            result = CandidateResult(number, index, text, tokens, "failed", changes=[change])
            return self._planned(result)

        return plan

    async def redraw(
        self,
        models: HealModels,
        messages: list[dict[str, Any]],
        task: str,
        *,
        n: int,
        seed: int | None,
        restore: Callable[[str], str] | None = None,
    ) -> RoundResult:
        """One round of `n` candidates of the current model sampled together, for a step whose
        plain reply made no edit (`heal_step.HealingModel`): the tests pick the one to apply."""
        self._task, self._restore, self._broke_checks = task, restore, 0
        source = await models.candidates()
        return await self.round(source, messages, 1, models.current, n=n, seed=seed, parallel=True)

    async def round(
        self,
        source: CandidateSource,
        messages: list[dict[str, Any]],
        number: int,
        label: Label,
        *,
        n: int | None = None,
        greedy: bool = False,
        seed: int | None = None,
        parallel: bool | None = None,
    ) -> RoundResult:
        """One round: generate, test each candidate as it finishes, report. With `first_pass`,
        the first candidate to pass ends the round: the candidates still being written or tested
        are cancelled (a passing one tested at the same moment still competes)."""
        s = self.settings
        n = n or s.n
        parallel = s.parallel if parallel is None else parallel
        item = self.emit.start(
            "heal", round=number, mode=label, n=n, test_cmd=self.test_cmd, status="in_progress"
        )
        if seed is None and s.seed is not None:
            seed = s.seed + 1000 * (number - 1)
        tests = self._round_tests(number, n)
        draw = Draw(n, s.temperature, s.max_tokens, seed, parallel, greedy)
        generation, results = await self._test_draw(tests, source.stream(messages, draw), stop=s.first_pass)
        cut_short = tests.timed_out and pick_best(results) is None
        return self._round_done(
            item, number, label, generation, results, candidates_ms=round(generation.wall_ms, 1),
            cut_short=cut_short,
        )  # fmt: skip

    async def _test_draw(
        self, tests: RoundTests, stream: CandidateStream, *, stop: bool
    ) -> tuple[Generation, list[CandidateResult]]:
        """A draw's candidates tested as they come (`RoundTests`), `stop`: the first to pass ending
        it; what was written, and each candidate's result. Leaving the stream gives up what was
        still being written; an error cancels the tests under way."""
        try:
            async with stream as written:
                await tests.read(written, stop_at_pass=stop)
            generation = written.generation()
            return generation, await tests.settle(generation, stop=stop)
        except BaseException:
            tests.cancel()
            raise

    def _round_tests(
        self,
        number: int,
        n: int,
        plan=None,
        *,
        at_once: int | None = None,
        timed: bool = False,
        within_s: float | None = None,
    ) -> RoundTests:
        """A round's tests; `at_once` bounds its runs at once (default: the settings'), and with
        `timed` the heal's time budget ends the round between runs, as `GUARD_PATIENCE` does.
        `within_s`: the round's draws are given up this long after it starts, where the heal's
        budget does not end them sooner (and, `timed`, it ends between runs there)."""

        round_ends = math.inf if within_s is None else time.monotonic() + within_s

        def enough() -> bool:
            spent = self.out_of_time() or time.monotonic() >= round_ends
            return self._broke_checks >= GUARD_PATIENCE or (timed and spent)

        deadline = self._deadline()  # every draw after the heal's first is cut where the budget ends
        why = "the heal's time budget ran out"
        if within_s is not None and time.monotonic() + within_s < (deadline or math.inf):
            deadline, why = time.monotonic() + within_s, f"the round's {within_s:g} s ran out"
        self._draws += 1
        return RoundTests(
            number, n, plan=plan or self._plan, test=self._test, tested=self._tested, emit=self.emit,
            max_parallel=at_once or self.settings.max_parallel_tests, enough=enough, deadline=deadline,
            out_of_time=why,
        )  # fmt: skip

    def _round_done(
        self, item, number: int, label: str, generation, results, *, cut_short: bool = False, **extra
    ) -> RoundResult:
        """A round's item completed with its figures (a repair round adds its duplicates, and
        whether the time budget cut its draws short)."""
        best = pick_best(results)
        self.emit.complete(
            item,
            method=generation.method,
            decode_ms=round(generation.wall_ms, 1),
            passed=sum(r.passed for r in results),
            cancelled=sum(r.status == "cancelled" for r in results),
            **extra,
            **({"out_of_time": True} if cut_short else {}),
            best=None if best is None else best.index,
            status="completed",
        )
        return RoundResult(number, label, generation, results, cut_short)

    def _plan(self, number: int, index: int, text: str, tokens: int) -> CandidateResult:
        if self._restore is not None:
            text = self._restore(text)
        result = CandidateResult(number, index, text, tokens, "failed")
        try:
            # Small models often answer with the whole file in a fence instead of an edit block,
            # or with the corrected function alone; here the tests judge every candidate, so
            # either is as good as an edit.
            strict = parse_edits(text)
            edits = strict or parse_edits(text, whole_files=True) or definition_edits(self.ws, text)
            if not edits and isinstance(fallback := code_without_edit(text, self._task, self.ws), ApplyEdits):
                edits = fallback.edits  # one code block for the one file the task names
            if not edits:
                result.status = "no_edit"
                return result
            known = [self._known_path(e) for e in edits]
            result.as_written = bool(strict) and known == edits
            edits = known
            result.changes = plan_edits(self.ws, edits)
        except (EditError, WhizAgentError) as exc:
            result.status, result.error = "malformed", exc.message.splitlines()[0]
            return result
        return self._planned(result)

    def _planned(self, result: CandidateResult) -> CandidateResult:
        """A candidate whose changes are known: written back unchanged, touching the tests, or
        ready to test (with its diff)."""
        result.changes = [c for c in result.changes if c.before != c.after]
        if not result.changes:
            result.status, result.unchanged = "no_edit", True
            result.error = "it wrote the code back unchanged"
            return result
        touched = [c.path for c in result.changes if c.path in self._tests]
        if touched and not self.settings.allow_test_edits:
            # The tests decide, so they stay as they are. A candidate that changed code too (often
            # it only quoted a test file back, a line off) is tested on its code changes alone.
            result.error = f"it changed {', '.join(touched)}, which holds tests that decide"
            result.changes = [c for c in result.changes if c.path not in self._tests]
            if not result.changes:
                result.status = "tests_changed"
                return result
            result.error += "; that change was left out"
            result.as_written = False
        result.diff = "".join(unified_diff(c) for c in result.changes)
        result.diff_lines = diff_size(result.changes)
        return result  # "failed" until its tests pass

    def writes_new_file(self, rounds: list[RoundResult]) -> bool:
        """Whether the heal's task makes a file that does not exist yet: a candidate wrote one, or
        the task names one the workspace lacks ("Write wc.py")."""
        if any(creates_file(r) for rnd in rounds for r in rnd.results):
            return True
        return any(not self._exists(path) for path in named_paths(self._task))

    def _exists(self, path: str) -> bool:
        """Whether a path the task names is there; one outside the workspace counts as there: no
        candidate may write it."""
        try:
            return self.ws.exists(path)
        except WhizAgentError:
            return True

    def _known_path(self, edit):
        """An edit of a file that does not exist, aimed where it was meant (`edits.aimed`: the one
        file of that name, "path/to/calc.py" for calc.py, or a file the task names)."""
        return aimed(edit, self.ws.exists, self._files, named_paths(self._task))

    def _files(self) -> list[str]:
        if self._listing is None:
            self._listing = self.ws.list_files(".", limit=5000)
        return self._listing

    async def _traced(self, brief: Brief, place: Localization, failure: str) -> Brief:
        """`brief` with what the place's failing call does, line by line (`trace_of`)."""
        found = await self.trace_of(place, failure)
        if found is None:
            return brief
        # It goes to the model: a secret file's values the function read stay out.
        secrets = SecretGate(self.ws)
        secrets.grant_named(self._task)
        fn = place.function
        said = secrets.redact(shown_trace(found, fn))
        return dataclasses.replace(brief, trace=said, traced=fn.where)

    async def _ran_lines(self, place: Localization) -> set[int] | None:
        """The lines of the place's function (1-based in its source) that its failing call ran
        (`trace_of`), or None where it could not be traced."""
        found = await self.trace_of(place, self._said_now) if self._said_now else None
        start = place.function.start
        return {line - start + 1 for line in found.ran} if found is not None else None

    async def trace_of(self, place: Localization, failure: str) -> Trace | None:
        """The place's failing call traced (`trace.py`), where what the tests said (`failure`) calls
        it with literal arguments and the call could be traced: once per heal and call, the code
        it runs being the same, a `trace` item saying what was traced. None where it was not."""
        fn = place.function
        call = failing_call(failure, fn) if self.settings.trace else None
        if call is None:
            return None
        key = (*fn.where, call)
        if key in self._traces:
            return self._traces[key]
        started = time.perf_counter()
        found = None
        try:
            copy = await self._copy()
        except CopyError:
            copy = None
        if copy is not None:
            try:
                found = await traced(Path(copy.path), self.settings.sandbox, fn, call, self.test_cmd)
            except (WhizAgentError, OSError):
                found = None
            finally:
                await asyncio.to_thread(copy.close)
        self._traces[key] = found
        ms = round((time.perf_counter() - started) * 1000, 1)
        ended = found.ended if found else "could not be traced"
        self.emit.single("trace", path=fn.path, function=fn.qualname, call=call,
                         lines=found.steps if found else 0, ended=ended, ms=ms)  # fmt: skip
        return found

    async def _copy(self):
        """A throwaway copy of the workspace (`isolated_copy`), made off the event loop."""
        sandbox = self.settings.sandbox
        copying = asyncio.ensure_future(
            asyncio.to_thread(
                isolated_copy,
                self.ws.root,
                prefix="whiz-heal-",
                secrets=self.ws.secrets,
                keep_secrets=sandbox.allow_secret_reads,
            )
        )
        try:
            return await asyncio.shield(copying)
        except asyncio.CancelledError:
            # Cancelled (the user stopped the heal) while the copy was being made: the thread goes
            # on, so remove its copy (and a worktree's registration) once it is there.
            copying.add_done_callback(_close_copy)
            raise

    async def _test(self, result: CandidateResult, timeout_s: float | None = None) -> None:
        started = time.perf_counter()
        try:
            copy = await self._copy()
        except CopyError as exc:
            result.error = exc.message
            return
        try:
            apply_changes(Workspace(copy.path), result.changes)
            limit = self.test_timeout_s()
            timeout_s = min(timeout_s, limit) if timeout_s else limit
            env = environment_for(copy.path, self.settings.sandbox, timeout_s=timeout_s)
            done = await env.run(self.test_cmd)
            checked = await env.run(self.guard) if done.ok and self.guard else None
        except (EditError, WhizAgentError, OSError) as exc:
            result.error = f"could not apply the edit in a copy: {getattr(exc, 'message', exc)}"
            return
        finally:
            await asyncio.to_thread(copy.close)
        # The copy's paths read as the workspace's: a traceback through the throwaway copy's
        # random folder confuses the model, and made the same candidate's feedback (and so the
        # next candidate) differ from run to run.
        secrets = SecretGate(self.ws)
        secrets.grant_named(self._task)

        def as_workspace(output: str) -> str:
            for where in {str(copy.path), str(Path(copy.path).resolve())}:
                output = output.replace(where, str(self.ws.root))
            # It goes back to the model as feedback: a secret file's values it prints stay out.
            return secrets.redact(output)

        output = as_workspace(done.output)
        result.exit_code, result.test_output = done.exit_code, output
        result.tests_passed = count_passed(output)
        if not done.ok:
            result.failure = failure_summary(output, str(self.ws.root))
        result.test_ms = (time.perf_counter() - started) * 1000
        result.status = "passed" if done.ok else ("timeout" if done.timed_out else "failed")
        if done.timed_out:
            result.error = f"its tests ran past {timeout_s:g} s and were stopped"
        else:
            self.saw_tests(done.duration_ms / 1000)
        if checked is not None and not checked.ok:
            self._checks_failed(result, as_workspace(checked.output))
        if (
            result.passed
            and result.finish_reason == "length"
            and runs_on(result.text)
            and only_check(self.test_cmd)
            and creates_file(result)
        ):
            # "It runs" is all a check says, and a program cut off at the token limit mostly runs.
            # One that ran on to the limit, repeating itself (one special case after another),
            # is wrong for all but the cases it reached; a long program merely cut short (a game)
            # is not judged so, since sampling more of it would cost minutes. Tests that pass
            # say more, so they still decide.
            result.status = "failed"
            result.error = (
                f"its reply ran on, repeating itself, to the {self.settings.max_tokens}-token limit: "
                "the program it began is not all there, though what is there runs"
            )

    def _checks_failed(self, result: CandidateResult, output: str) -> None:
        """A candidate whose tests pass and whose checks the code holds (`guard`) fail: a fix fitted to
        the few cases the tests show, most likely, so it fails, and what the checks said is what
        the next candidates hear."""
        said = failure_summary(output, str(self.ws.root)).rstrip() or output.strip()[-2000:]
        result.status, result.checks_failed = "failed", True
        self._broke_checks += 1
        result.error = f"its tests pass, but {shown(self.guard or '')} fail on it"
        result.failure = f"The tests pass, but {shown(self.guard or '')} fail:\n{said}"
        result.test_output = f"{result.test_output.rstrip()}\n\n{output}"


def _close_copy(copying: asyncio.Future) -> None:
    """Remove a copy whose maker was cancelled; in a thread, since removing a worktree runs git."""
    if copying.cancelled() or copying.exception() is not None:
        return
    copy = copying.result()
    asyncio.get_running_loop().run_in_executor(None, copy.close)


def joined(generations: list[Generation]) -> Generation:
    """Several draws' generations as one round's: their candidates in order, their times summed."""
    return Generation(
        [t for g in generations for t in g.texts],
        [k for g in generations for k in g.output_tokens],
        sum(g.wall_ms for g in generations),
        generations[-1].method if generations else "n",
        sum(g.prompt_tokens for g in generations),
        [r for g in generations for r in g.finish_reasons],
    )


def localized_item(found: Localized) -> dict[str, Any]:
    """The `localize` item's fields: the places found, whether the model was sure, its reply."""
    places = [
        {"path": p.function.path, "function": p.function.qualname,
         "lines": [p.function.start, p.function.end], "hypothesis": p.hypothesis, "origin": p.origin}
        for p in found.places
    ]  # fmt: skip
    ms = round(found.generation.wall_ms, 1) if found.generation else 0.0  # 0: nothing was asked
    return {"places": places, "sure": found.sure, "reply": truncate(found.reply, 1000), "ms": ms}


MAX_FAILURE_CHARS = 4000


def heal_messages(
    ws: Workspace,
    task: str,
    test_cmd: str,
    baseline: CommandResult | None,
    *,
    code_tokens: int = CODE_TOKENS,
) -> list[dict]:
    """The conversation a heal starts from: the agent's instructions, the task with its files, and
    (when the tests fail now) their output, with the code it passes through attached too."""
    failing = baseline is not None and not baseline.ok
    evidence = baseline.output if failing else ""
    text, _ = task_message(ws, task, code_tokens=code_tokens, evidence=evidence)
    if failing:
        output = failure_summary(baseline.output, str(ws.root), MAX_FAILURE_CHARS).rstrip()
        text += f"\n\nThe tests (`{shown(test_cmd)}`) fail now:\n```\n{output}\n```"
    # The tests' output may print a secret file's values: only those the task names go out.
    secrets = SecretGate(ws)
    secrets.grant_named(task)
    text = secrets.redact(text)
    instructions = system_prompt(ws, "text", test_cmd=test_cmd)
    return [{"role": "system", "content": instructions}, {"role": "user", "content": text}]
