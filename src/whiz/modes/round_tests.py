"""One heal round's candidates, each parsed and tested in its own copy as soon as it arrives,
the round ending at the first pass when asked; the same change twice shares one test run."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from whiz.agent.events import Emitter
from whiz.modes.candidates import Candidate, CandidateStream, Generation
from whiz.modes.heal_results import CandidateResult
from whiz.modes.repair import change_key


class RoundTests:
    """One round's candidates, each parsed and tested (in its own copy) as soon as it arrives.
    A candidate with the same edit as an earlier one shares that one's test run."""

    def __init__(
        self,
        number: int,
        n: int,
        *,
        plan: Callable[[int, int, str, int], CandidateResult],
        test: Callable[[CandidateResult], Awaitable[None]],
        tested: dict[tuple, CandidateResult],
        emit: Emitter,
        max_parallel: int = 0,
        enough: Callable[[], bool] | None = None,
        deadline: float | None = None,
        out_of_time: str = "the heal's time budget ran out",
    ):
        self.number = number
        self.plan = plan
        """Makes a candidate's text an edit: `Healer._plan`, or a repair's function rewrite."""
        self.test = test
        """Runs a candidate's tests in its own copy and fills in what they said."""
        self.tested = tested
        """Every change tested so far in this heal, by `change_key`: the same change in a later
        round is a duplicate, not tested again."""
        self.emit = emit
        self.enough = enough
        """Ends the round as a pass does, when it says so (`healing.GUARD_PATIENCE`)."""
        self.deadline = deadline
        """When (`time.monotonic`) the candidates still being written are given up (the heal's time
        budget): a draw that has decoded for a minute may need another, and the turn would end
        far past its budget. The tests already under way still finish (their own timeout)."""
        self.timed_out = False
        """Whether the deadline ended the writing before every candidate came."""
        self.out_of_time = out_of_time
        """What the deadline is, as a cancelled candidate's error says it ran out."""
        self.offset = 0
        """The index of this draw's first candidate in its round (a repair round draws again)."""
        self.results: dict[int, CandidateResult] = {}
        self.tasks: list[asyncio.Task] = []
        self.passed = asyncio.Event()
        self._reported: set[int] = set()
        self._firsts: dict[tuple, tuple[CandidateResult, asyncio.Task]] = {}
        # The round's own n: a fast-mode retry draws 3 where its settings say 0 (no heal), and
        # its candidates' tests ran one at a time, a hanging one holding up the rest.
        self._limit = asyncio.Semaphore(max_parallel or max(1, n))

    async def read(self, found: CandidateStream, *, stop_at_pass: bool) -> None:
        """Take candidates until all have come, or (`stop_at_pass`) until one passes its tests."""
        reading = asyncio.create_task(self._take_all(found))
        try:
            if stop_at_pass:
                await self._until_passed(reading, timeout=self._left())
            else:
                await asyncio.wait({reading}, timeout=self._left())
            self.timed_out = not reading.done() and not self.passed.is_set()
        finally:
            reading.cancel()
        if reading.done() and not reading.cancelled():
            reading.result()  # the source's error, if it failed

    def _left(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    async def _until_passed(self, work: asyncio.Future, timeout: float | None = None) -> None:
        """Wait for `work`, or until a candidate passes, or `timeout`, whichever comes first."""
        passing = asyncio.create_task(self.passed.wait())
        try:
            await asyncio.wait({work, passing}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            passing.cancel()

    async def _take_all(self, found: CandidateStream) -> None:
        async for candidate in found:
            self.take(candidate)

    def take(self, candidate: Candidate) -> None:
        index = self.offset + candidate.index
        result = self.plan(self.number, index, candidate.text, candidate.output_tokens)
        result.finish_reason = candidate.finish_reason
        self.results[index] = result
        if result.status != "failed":  # malformed or no edit: nothing to test
            self._report(result)
            return
        # Changes equal but for layout and comments are one candidate (`repair.change_key`).
        key = change_key(result.changes)
        earlier = self.tested.get(key)
        if key in self._firsts:
            twin, run = self._firsts[key]
            result.same_as = twin.index
            self.tasks.append(asyncio.create_task(self._same_as(result, twin, run)))
        elif earlier is not None:
            result.status, result.same_as = "duplicate", earlier.index
            result.error = (
                f"the same change as round {earlier.round}'s candidate {earlier.index}, tested already"
            )
            result.exit_code, result.failure = earlier.exit_code, earlier.failure
            self._report(result)
        else:
            run = asyncio.create_task(self._test(result))
            self._firsts[key] = (result, run)
            self.tested[key] = result
            self.tasks.append(run)

    async def _test(self, result: CandidateResult) -> None:
        async with self._limit:
            await self.test(result)
        self._report(result)

    async def _same_as(self, result: CandidateResult, twin: CandidateResult, run: asyncio.Task) -> None:
        await run
        self._copy_twin(result, twin)
        self._report(result)

    @staticmethod
    def _copy_twin(result: CandidateResult, twin: CandidateResult) -> None:
        result.status, result.exit_code, result.test_output, result.error = (
            twin.status, twin.exit_code, twin.test_output, twin.error
        )  # fmt: skip
        result.failure, result.tests_passed = twin.failure, twin.tests_passed
        result.checks_failed = twin.checks_failed

    def _report(self, result: CandidateResult) -> None:
        self._reported.add(result.index)
        self.emit.single("heal_candidate", **result.item())
        if result.passed or (self.enough is not None and self.enough()):
            self.passed.set()

    async def settle(self, generation: Generation, *, stop: bool) -> list[CandidateResult]:
        """Wait for the tests under way; with `stop`, only until one passes, then stop the rest.
        A candidate that was never written out, or whose tests were stopped, is reported as
        cancelled. Returns the round's results by index."""
        if stop and self.tasks:
            # Every candidate is written; their tests still run, and the first pass ends them.
            await self._until_passed(asyncio.gather(*self.tasks, return_exceptions=True))
        if stop and self.passed.is_set():
            self.cancel()
        for outcome in await asyncio.gather(*self.tasks, return_exceptions=True):
            if isinstance(outcome, Exception):
                raise outcome
        for at, text in enumerate(generation.texts):
            index = self.offset + at
            if index in self._reported:
                continue
            result = self.results.get(index)
            if result is None:  # still being written when the round ended
                result = CandidateResult(self.number, index, text, generation.output_tokens[at], "cancelled")
                result.error = (
                    f"{self.out_of_time} while this one was being written"
                    if self.timed_out
                    else "another candidate passed first; this one was still being written"
                )
                self.results[index] = result
            elif result.same_as is not None and result.same_as in self._reported:
                self._copy_twin(result, self.results[result.same_as])  # its twin's run did end
            else:
                result.status = "cancelled"
                result.error = "another candidate passed first; its tests were stopped"
            self._report(result)
        return [self.results[i] for i in sorted(self.results)]

    def cancel(self) -> None:
        for task in self.tasks:
            task.cancel()
