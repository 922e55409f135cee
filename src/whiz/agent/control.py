"""Running a turn's steps so they can be stopped: by the user (`cancel`), or at the turn's limits
(`Budget`).

Each step runs as a task of its own. Cancelling one that waits on the model lets the server end
the response first (its partial reply stays in the conversation, and the next call can chain
from it), cut off if that takes longer than `cancel_grace_s`; a command is killed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

from whiz.agent.config import AgentConfig
from whiz.agent.runs_check import shown
from whiz.agent.signals import Cancelled, OverBudget
from whiz.client import ClientError


class Steps:
    """The step that runs now, and whether the user stopped the turn. Use from the event loop's
    thread."""

    def __init__(self, cancel_model: Callable[[], Awaitable[None]], config: AgentConfig):
        self._cancel_model = cancel_model
        self.config = config
        self.running = False
        """Whether a turn is running."""
        self.cancelled = False
        """Whether the user stopped this turn."""
        self.in_model = False
        """Whether the running step waits on the model."""
        self._step: asyncio.Task | None = None
        self._cancelling: asyncio.Future | None = None

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """While a turn runs; RuntimeError if one already does."""
        if self.running:
            raise RuntimeError("a turn is already running; steer() or cancel() it")
        self.running = True
        try:
            yield
        finally:
            self.running, self._step = False, None

    def cancel(self) -> None:
        """Stop the turn now. A model call is cancelled on the server; a command is killed."""
        if not self.running or self.cancelled:
            return
        self.cancelled = True  # between steps, the loop sees this before the next one
        step = self._step
        if step is None or step.done():
            return
        if self.in_model:
            self._cancelling = asyncio.ensure_future(self.cancel_model())
            asyncio.get_running_loop().call_later(self.config.cancel_grace_s, step.cancel)
        else:
            step.cancel()

    async def cancel_model(self) -> None:
        """Ask the model to stop the reply in flight."""
        with contextlib.suppress(ClientError):  # the connection is gone: nothing left to stop
            await self._cancel_model()

    async def run(
        self, step: Callable[[], Coroutine[Any, Any, Any]], budget: Budget, output_tokens: int
    ) -> None:
        """Run `step()` as the current step, within `budget` (the turn has used `output_tokens`).
        Raises `Cancelled` when the user stopped the turn, `OverBudget` past a limit."""
        if self.cancelled:
            raise Cancelled("cancelled")
        budget.check_tokens(output_tokens)
        self._step = asyncio.ensure_future(step())
        try:
            done, _ = await asyncio.wait({self._step}, timeout=max(0.0, budget.seconds_left()))
        except asyncio.CancelledError:
            self._step.cancel()  # the caller's own cancellation reaches the step
            raise
        if not done:
            await self._stop()
            raise budget.out_of_time()
        try:
            await self._step
        except asyncio.CancelledError:
            if not self.cancelled:
                raise  # the caller's own cancellation
            raise Cancelled("cancelled") from None

    async def _stop(self) -> None:
        """Stop a step that ran out of time: the server stops generating, a command is killed."""
        step = self._step
        if self.in_model:
            with contextlib.suppress(ClientError, asyncio.TimeoutError):
                await asyncio.wait_for(self.cancel_model(), self.config.cancel_grace_s)
        step.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await step


class Budget:
    """A turn's limits: its output tokens, its time and its failing test runs
    (`AgentConfig.max_turn_output_tokens`, `max_turn_s`, `max_test_failures`). `fresh` starts
    them again, as when a deeper model takes over the turn."""

    def __init__(self, config: AgentConfig):
        self.config = config
        self.deadline = 0.0
        self.tokens_before = 0
        self.test_failures = 0

    def fresh(self, output_tokens: int) -> None:
        """Start the limits now, with `output_tokens` (the turn's so far) already used."""
        self.deadline = time.perf_counter() + self.config.max_turn_s
        self.tokens_before = output_tokens
        self.test_failures = 0

    def tokens_left(self, output_tokens: int) -> int:
        return self.config.max_turn_output_tokens - (output_tokens - self.tokens_before)

    def seconds_left(self) -> float:
        return self.deadline - time.perf_counter()

    def check_tokens(self, output_tokens: int) -> None:
        """Raise `OverBudget` when the turn has used its output tokens."""
        if self.tokens_left(output_tokens) <= 0:
            raise OverBudget(
                f"stopped: the turn used its {self.config.max_turn_output_tokens} output tokens "
                "without finishing the task"
            )

    def out_of_time(self) -> OverBudget:
        """The error for a step stopped at the turn's time limit."""
        return OverBudget(f"stopped: the turn ran past its time limit of {self.config.max_turn_s:g} s")

    def tests_failed(self) -> None:
        """The tests failed after an edit: `OverBudget` once they did so `max_test_failures` times."""
        self.test_failures += 1
        if self.test_failures >= self.config.max_test_failures:
            tests = shown(self.config.test_cmd or "")
            raise OverBudget(
                f"stopped: the tests (`{tests}`) failed after {self.test_failures} edits in this turn; "
                "the last edit is kept (`whiz undo` takes the turn back)"
            )
