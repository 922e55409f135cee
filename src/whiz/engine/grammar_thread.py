"""Grammar matching off the engine thread, under a deadline the engine thread enforces: for matchers
that cannot be built in another process (the fake runtime's, a test's). Over llama.cpp the engine
uses `grammar_process.py` instead, where a call past its deadline is stopped, not let go.

A matcher call is one call into llama.cpp's grammar code, and nothing stops a C call halfway: a
grammar whose readings multiply with what the model writes (a recursive schema whose alternatives
open alike: every `[` doubles the ways to read the call) took 8 s and then 42 s for one token's
`accept`, and the budget in `grammar.py`, which looks at the clock between calls, could only see it
afterwards, while every other stream waited. So the engine thread hands each call to this thread
(ctypes lets go of the GIL in the call, so both run at once) and waits until the call has spent
`DEADLINE_MS` of CPU time (or ten times that by the clock: `cpu_wait.py`, so that a loaded machine
does not turn a cheap call into a refusal). Past it the request ends with `GrammarTooSlow`, and
the engine goes on with the others; the call finishes on its own thread, which is then let go. A
fresh thread takes the next calls, at most
`MOST_ABANDONED` left running at once; past that, grammar requests end at once with the same error
until one of them returns, so a flood of such grammars cannot take every core.

What a call costs its thread in CPU time (less its garbage collections, by the `clock` given) is
added up in `cpu_s`, which the per-token budget in `grammar.py` reads, so it is the same budget
whichever thread does the work.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from whiz.engine.cpu_wait import WALL_FACTOR, thread_spent, wait_spending
from whiz.errors import EngineError

DEADLINE_MS = 1000.0
"""CPU time one matcher call may spend while the engine thread waits for it: five times one token's
CPU budget, and well under what a reader calls a stall."""
MOST_ABANDONED = 2
"""Calls past their deadline left running at once (each holds a core until it returns)."""


def too_long(deadline_ms: float) -> str:
    """What a call past its deadline did, in the words of the error."""
    return (
        f"took more than {deadline_ms:g} ms of CPU time (or {deadline_ms * WALL_FACTOR / 1000:g} s in "
        "all) for one call"
    )


class _Reply:
    """A call's reply: the grammar thread puts it in `queue`; `ready` waits for it and keeps it."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.value: Any = None
        self.arrived = False

    def ready(self, timeout_s: float) -> bool:
        """Whether the reply came within `timeout_s` (or before)."""
        if not self.arrived:
            try:
                self.value = self.queue.get(timeout=timeout_s)
            except queue.Empty:
                return False
            self.arrived = True
        return True


class GrammarTooSlow(EngineError):
    """Matching this request's grammar took longer than the engine lets one request hold it."""

    def __init__(self, what: str):
        super().__init__(
            f"{what}: its schema has alternatives that the output can keep open without end "
            "(a recursive schema whose branches start alike?). Simplify the schema, or send "
            '"whiz": {"tool_grammar": false} to leave tool calls unconstrained.'
        )


class GrammarUnavailable(EngineError):
    """Grammar matching cannot take this request now (its process is starting again or failed);
    the request ends with this, never with output that only looks constrained."""


class _Worker:
    def __init__(self, owner: GrammarThread):
        self.owner = owner
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.abandoned = False
        self.thread = threading.Thread(target=self._serve, name="whiz-grammar", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            item = self.jobs.get()
            if item is None:
                if self.abandoned:  # let go while idle: its call returned just past the deadline
                    self.owner._returned()
                return
            fn, args, reply = item
            t0 = self.owner.clock()
            try:
                result = (True, fn(*args))
            except BaseException as exc:  # the engine thread raises it
                result = (False, exc)
            reply.put((result, self.owner.clock() - t0))
            del fn, args, item, result  # a call let go must not keep its matcher alive here
            if self.abandoned:
                self.owner._returned()
                return


class GrammarThread:
    """`call(fn, *args)`: `fn(*args)` on the grammar thread, or `GrammarTooSlow` past the deadline."""

    def __init__(
        self,
        *,
        deadline_ms: float = DEADLINE_MS,
        most_abandoned: int = MOST_ABANDONED,
        clock: Callable[[], float] = time.thread_time,
    ):
        self.deadline_ms = deadline_ms
        self.most_abandoned = most_abandoned
        self.clock = clock
        """CPU seconds of the calling thread (the scheduler's `MatchingClock`)."""
        self.cpu_s = 0.0
        """CPU time the calls that returned cost their thread, in all."""
        self.abandoned = 0
        """Calls past their deadline still running."""
        self.timeouts = 0
        """Calls that passed their deadline, in all (for /health and the tests)."""
        self._lock = threading.Lock()
        self._worker: _Worker | None = None

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        with self._lock:
            if self.abandoned >= self.most_abandoned:
                raise GrammarTooSlow(
                    "grammar matching is held by other requests whose grammars took too long; "
                    "this request's grammar could not be matched"
                )
        if self._worker is None:
            self._worker = _Worker(self)
        reply = _Reply()
        spent = thread_spent(self._worker.thread.ident)
        self._worker.jobs.put((fn, args, reply.queue))
        if wait_spending(reply.ready, spent, self.deadline_ms / 1000):
            (ok, value), cpu_s = reply.value
        else:
            with self._lock:
                self._worker.abandoned = True
                self.abandoned += 1
                self.timeouts += 1
            # The call may have returned between the timeout and the flag, its thread then back
            # waiting for work: this ends it there, counted back in, as a call returning late is.
            self._worker.jobs.put(None)
            self._worker = None
            raise GrammarTooSlow(f"matching the tool-call grammar {too_long(self.deadline_ms)}")
        self.cpu_s += cpu_s
        if ok:
            return value
        raise value

    def matcher(self, factory: Callable[[str, str], Any], gbnf: str, root: str) -> _OffThread:
        """`factory(gbnf, root)`, built on the grammar thread, every call on it made there too."""
        return _OffThread(self.call(factory, gbnf, root), self)

    def _returned(self) -> None:
        with self._lock:
            self.abandoned -= 1

    def close(self) -> None:
        if self._worker is not None:
            self._worker.jobs.put(None)
            self._worker = None


class _OffThread:
    """A matcher whose every call runs on the grammar thread, under its deadline."""

    def __init__(self, inner: Any, runner: GrammarThread):
        self.inner = inner
        self.runner = runner

    def allowed(self, ids: Any) -> Any:
        return self.runner.call(self.inner.allowed, ids)

    def accept(self, token: int) -> None:
        self.runner.call(self.inner.accept, token)

    def can_end(self) -> bool:
        return self.runner.call(self.inner.can_end)
