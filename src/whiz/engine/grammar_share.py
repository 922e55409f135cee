"""The engine's time for grammar matching, shared: many grammars must not stall the other streams.

Each request's matching has its own caps (`grammar.py`: 200 ms a token, 50 ms on average), but
matching runs on the engine thread every request shares, and a step waits for every job in it:
eight requests each just under their caps, side by side, once made every other client's step
take eight times as long. So while requests without a running grammar share the engine, matching
gets at most about `SHARE` of its time: a credit that grows with the time the engine spends on
everything else (at most `STEP_MS` of it saved up), and a grammar job joins a step only while its
expected cost fits the credit. The others wait for a later step, oldest waiting first, and lose
nothing but time; the reply says how long (`grammar_wait` in its `whiz` object). When the credit
is full and no job fits it, the first in line joins anyway: every grammar job moves on.

With no plain stream running, matching stalls only other grammars, and every job joins every step.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable
from typing import Protocol

SHARE = 0.5
"""Most of the engine's time grammar matching takes while other streams run."""
STEP_MS = 50.0
"""Most matching one step holds for others (unless a single job needs more, when the credit is
full): a quarter of one token's budget, what a grammar may cost per token on average."""


class _Constraint(Protocol):
    @property
    def matching(self) -> bool: ...

    def expected_ms(self) -> float: ...


class _Job(Protocol):
    constraint: _Constraint | None
    stats: object


def matching(job: _Job) -> bool:
    """Whether choosing `job`'s next token runs a grammar matcher."""
    return job.constraint is not None and job.constraint.matching


class GrammarShare:
    """Which grammar jobs join each step (`held`), and the credit they spend (`earned`, `spent`)."""

    def __init__(self, share: float = SHARE, step_ms: float = STEP_MS):
        self.ratio = share / (1 - share)
        self.step_ms = step_ms
        self.credit_ms = step_ms
        self._waiting_since: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()
        self._waited_s: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()
        self.held_steps = 0
        """Job-steps a grammar job waited (for /health's load and the tests)."""

    def held(self, candidates: Iterable[_Job], everyone: Iterable[_Job]) -> set[_Job]:
        """Of `candidates` (jobs that would match a grammar this step), those that wait."""
        grammar = [job for job in candidates if matching(job)]
        if not grammar or all(matching(job) for job in everyone):
            self._admitted(grammar)
            return set()
        now = time.monotonic()
        grammar.sort(key=lambda job: self._waiting_since.get(job, now))  # longest waiting first
        budget = self.credit_ms
        admitted = []
        for job in grammar:
            cost = job.constraint.expected_ms()  # type: ignore[union-attr]
            if cost <= budget:
                admitted.append(job)
                budget -= cost
        if not admitted and self.credit_ms >= self.step_ms:
            admitted.append(grammar[0])
        self._admitted(admitted)
        waiting = set(grammar) - set(admitted)
        for job in waiting:
            self._waiting_since.setdefault(job, now)
        self.held_steps += len(waiting)
        return waiting

    def earned(self, other_ms: float) -> None:
        """The engine spent `other_ms` on work other than matching: matching may have its share."""
        self.credit_ms = min(self.step_ms, self.credit_ms + other_ms * self.ratio)

    def spent(self, matching_ms: float) -> None:
        self.credit_ms -= matching_ms

    def _admitted(self, jobs: Iterable[_Job]) -> None:
        now = time.monotonic()
        for job in jobs:
            since = self._waiting_since.pop(job, None)
            if since is None:
                continue
            waited = self._waited_s.get(job, 0.0) + now - since
            self._waited_s[job] = waited
            notes = getattr(job.stats, "notes", None)
            if notes is not None:
                notes["grammar_wait"] = (
                    f"waited {waited * 1000:.0f} ms in all for grammar time: other requests' "
                    "grammars and streams share the engine"
                )
