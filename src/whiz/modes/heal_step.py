"""Healing as a step of the agent: where the tests decide, the reply is the best of N candidates.

`HealingModel` is a `ModelClient` that sits between the agent and its model. At the steps where
a test command decides (the first step of a turn, and every step after the tests failed), it
runs a heal (`healing.Healer`) instead of asking for one reply, and answers with the winning
candidate as edit blocks; the agent applies it like any reply, so approvals, undo and the final
test run work as usual.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from typing import Any

from whiz.agent.editing.edits import EXAMPLE_SEARCH
from whiz.agent.events import Event
from whiz.agent.models.chat_model import chat_messages
from whiz.agent.models.seam import (
    Finished,
    ModelClient,
    ModelEvent,
    ModelRequest,
    ModelText,
    WrappedModel,
    output_items,
)
from whiz.agent.runs_check import shown
from whiz.errors import WhizError
from whiz.modes.heal_results import CandidateResult, HealOutcome, RoundResult, best_failure, creates_file
from whiz.modes.healing import Healer
from whiz.modes.router import ModeRouter

NEW_PROGRAM_FIXES = 2
"""Plain replies that may mend a new program after a heal without a winner: with the applied
candidate's failing check, they make the turn's three failing test runs (`max_test_failures`)."""

REDRAW_N = 3
"""Candidates drawn together for a step whose plain reply made no edit (`HealingModel`)."""


class HealingModel(WrappedModel):
    """Healing as a step of the agent: a `ModelClient` that, where the tests decide, answers with
    the best of N candidates instead of one reply.

    It heals the first step of a turn and every step after the tests failed, until a step yields
    candidates with edits. The agent applies the winning reply like any other (so undo, approvals
    and the final test run work as usual). With no winner it answers with the best failure (the
    closest the candidates came), and the turn ends at its next model call, saying so: a second
    heal of the same task, on nearly the same prompt, costs as much again and rarely passes where
    the first found nothing (such turns ran to their time budget). A new program gets two plain
    replies first (`NEW_PROGRAM_FIXES`) while the heal's time budget lasts, and a ladder on which
    no candidate changed the code one. Auto mode's ladder is climbed once a turn, whatever it
    found. `observe` must see the agent's events.

    Where it does not heal (fast and deep modes without `--heal`), a step that retries a reply
    that made no edit (`ModelRequest.retry_from`) draws `redraw_n` sampled replies together from
    the conversation before it and answers with the one the tests like best: in fast mode the
    0.5B wrote the file back unchanged on both of its single sampled retries, and a batch of
    three costs about one and a half replies. Only until the turn's first edit: after it, each
    redraw's closest failure was applied and the tests failed again, step after step, to the
    step limit.
    (A heal has drawn its samples already.)
    """

    def __init__(self, inner: ModelClient, healer: Healer, router: ModeRouter):
        super().__init__(inner)
        self.healer = healer
        self.router = router
        self._armed = False
        self._spent: str | None = None
        """Why the turn ends at its next model call: its heal found no passing candidate."""
        self._climbed = False
        """Whether this turn has climbed its ladder (auto mode's heal, once a turn)."""
        self._fixes = 0
        """Plain replies left before a spent turn ends (a new program's fixes)."""
        self._fixes_until = math.inf
        """When the last heal's time budget ended (`HealSettings.budget_s`): no fix starts after
        it, so a turn whose heal ran to its budget ends with it, not a minute of replies later."""
        self._redraws = 0
        """Retries drawn as several candidates this turn: each is seeded apart from the last."""
        self.redraw_n = REDRAW_N
        """Candidates of a retry drawn together (0 or 1: a retry is one plain reply)."""
        self._testing: dict[Any, float] = {}
        """When each of the agent's runs of the test command began, by item id (`Healer.saw_tests`)."""

    @property
    def active(self) -> bool:
        """Whether it heals at all: with fewer than 2 candidates every step is one plain reply."""
        return self.healer.settings.n > 1

    def observe(self, event: Event) -> None:
        kind, item = event.get("type"), event.get("item") or {}
        tests = item.get("type") == "command_execution" and (
            item.get("command", "").strip() == self.healer.test_cmd.strip()
        )
        if tests and kind == "item.started":
            self._testing[item.get("id")] = time.perf_counter()
        elif tests and kind == "item.completed":
            began = self._testing.pop(item.get("id"), None)
            if began is not None and item.get("exit_code") is not None:  # not killed at its timeout
                self.healer.saw_tests(time.perf_counter() - began)
        tests_failed = tests and kind == "item.completed" and item.get("status") == "failed"
        if kind == "turn.started":
            self._spent, self._climbed, self._redraws = None, False, 0
        # A ladder is climbed once a turn: after it, failing tests get plain replies.
        if kind == "turn.started" or (tests_failed and not self._climbed):
            self._armed = True

    async def respond(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self._spent is not None and self._fixes > 0 and time.monotonic() >= self._fixes_until:
            self._fixes = 0
            budget = self.healer.settings.budget_s
            self._spent += f" The heal's time budget ({budget:g} s) is spent: no reply followed to mend it."
        if self._spent is not None and self._fixes > 0:
            self._fixes -= 1  # a plain reply to what the check said about the new program
            async for event in self.inner.respond(request):
                yield event
            return
        if self._spent is not None:
            yield Finished("failed", error=self._spent)
            return
        if request.retry and not self.active and self.redraw_n > 1 and not request.edited:
            async for event in self._redraw(request):
                yield event
            return
        if not self._armed or not self.active:
            async for event in self.inner.respond(request):
                yield event
            return
        try:
            messages = chat_messages(request.instructions, request.items)
            restore = None if request.hollow is None else request.hollow.restore
            budget = self.healer.settings.budget_s
            self._fixes_until = math.inf if budget is None else time.monotonic() + budget
            outcome = await self.healer.heal(self.router, messages, request.task or "", restore=restore)
        except WhizError as exc:  # no server for the candidates, say: the turn fails with why
            yield Finished("failed", error=exc.message)
            return
        results = outcome.results
        tested = [r for r in results if r.status in ("passed", "failed", "timeout")]
        self._climbed = self.healer.settings.ladder
        if tested or self._climbed:
            # A ladder spends its every rung (the deep model's too) even when no candidate has an
            # edit to test: another climb would cost as much for the same replies (seen in whiz
            # bench agent: three climbs in a turn), so the rest of the turn is plain replies.
            self._armed = False
        choice = outcome.best or best_failure(results)
        if outcome.best is None and tested:
            self._spent = spent(outcome, self.healer.test_cmd)
            # A new program that fails its check mostly fails on something local (an import left
            # out, an index off) in code the model wrote from scratch: replies that see it
            # applied, with the error, mend that for less than writing the program again. An
            # edit of existing code gets no such step: the heal was the whole try.
            self._fixes = NEW_PROGRAM_FIXES if choice is not None and creates_file(choice) else 0
        elif outcome.best is None and self._climbed:
            # No rung changed the code: a plain reply gets the failing tests' output (the agent
            # runs them on the code written back), which no candidate saw; one, no more. More
            # such replies went on to the turn's format-retry limit, edit after failing edit,
            # over a minute after the ladder, and the deep model's second reply alone took 30 s.
            self._spent = spent(outcome, self.healer.test_cmd, after_ladder=True)
            self._fixes = 1
        if choice is None and results:
            choice = results[0]  # no edits anywhere (it wants to read first): take a reply as is
        if choice is not None and choice.unchanged:
            # No candidate changed anything, and the best wrote the code back as it was (edit
            # blocks whose new text is their old, or the whole file): another round on nearly the
            # same prompt and the same seeds writes it again, so the next step is one plain reply
            # to the agent's feedback (failing tests re-arm the step).
            self._armed = False
        if choice is None:
            async for event in self.inner.respond(request):
                yield event
            return
        async for event in answer(choice, outcome.rounds):
            yield event

    async def _redraw(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """A retry as `redraw_n` candidates drawn together from the conversation before the replies
        that made no edit: the first to pass, else the closest failure (an edit that ran before
        one that changed nothing). Sampled at the healer's temperature, seeded apart from this
        turn's earlier retries."""
        self._redraws += 1
        seed = self.healer.settings.seed
        seed = None if seed is None else seed + 7919 * self._redraws
        try:
            messages = chat_messages(request.instructions, request.retry_from or request.items)
            restore = None if request.hollow is None else request.hollow.restore
            found = await self.healer.redraw(
                self.router, messages, request.task or "", n=self.redraw_n, seed=seed, restore=restore
            )
        except WhizError as exc:
            yield Finished("failed", error=exc.message)
            return
        choice = found.best or best_failure(found.results)
        # Nothing usable: code written back unchanged is sent back again (the turn's next retry
        # draws anew), where words would end the turn, and the instructions' example echoed would
        # get a plain reply, which the 0.5B echoed again. An edit that missed
        # its file still goes back with what it missed. An edit whose tests never ended is not
        # applied while there is another: the agent's own run of them would hang to its timeout.
        echoed = choice is not None and choice.status == "malformed" and EXAMPLE_SEARCH in choice.text
        if choice is not None and (choice.status in ("no_edit", "timeout") or echoed):
            choice = next((r for r in found.results if written_back(r)), choice)
        if choice is None:
            async for event in self.inner.respond(request):
                yield event
            return
        async for event in answer(choice, [found]):
            yield event


async def answer(choice: CandidateResult, rounds: list[RoundResult]) -> AsyncIterator[ModelEvent]:
    """The chosen candidate as the step's reply (its edits, or its text where it has none), with
    what the rounds that found it cost."""
    text = choice.reply() if choice.changes else choice.text
    yield ModelText(text)
    usage = {
        "input_tokens": sum(r.generation.prompt_tokens for r in rounds),
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": sum(sum(r.generation.output_tokens) for r in rounds),
    }
    timings = {
        "decode_tokens": usage["output_tokens"],
        "decode_ms": sum(r.generation.wall_ms for r in rounds),
        # Bounded by the heal's own budget: not the turn's output tokens (`TurnStats.budgeted_tokens`).
        "heal_tokens": usage["output_tokens"],
    }
    yield Finished("completed", output_items(text, []), usage, timings)


def spent(outcome: HealOutcome, test_cmd: str, *, after_ladder: bool = False) -> str:
    """Why a turn ends after a heal without a winner: how many candidates of which models failed
    (`after_ladder`: changed nothing, and the plain reply after them did not pass)."""
    by_model: dict[str, int] = {}
    for rnd in outcome.rounds:
        by_model[rnd.mode] = by_model.get(rnd.mode, 0) + len(rnd.results)
    count = sum(by_model.values())
    parts = ", ".join(f"{k} from the {label} model" for label, k in by_model.items())
    if outcome.out_of_time:
        parts += "; stopped at the heal's time budget"
    if after_ladder:
        return (
            f"no candidate changed the code ({count}: {parts}), and the reply after them did "
            f"not make `{shown(test_cmd)}` pass"
        )
    return (
        f"no candidate passed `{shown(test_cmd)}` ({count}: {parts}); "
        "the closest one is applied (`whiz undo` takes it back)"
    )


def written_back(result: CandidateResult) -> bool:
    """Whether a candidate with no edit shows code: the file written back as it is, not words and
    not the instructions' example echoed (the 0.5B's samples did both)."""
    text = result.text
    shows_code = "```" in text or "<<<<<<<" in text
    return result.status == "no_edit" and shows_code and EXAMPLE_SEARCH not in text
