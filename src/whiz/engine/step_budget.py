"""How many rows one step may hold while other requests wait on it.

Every request shares the engine's steps, and a step ends only when its whole batch is decoded: a
stream's next token waits for everything else in the batch. A long prompt's prefill chunk is what
grows a batch most (a tool schema alone can be a thousand tokens), and on a 2-core AVX2 CPU a row
costs about 9 ms, prefill or not: a 256-row chunk held every other stream for 2.4 s a token. So
while more than one job is active, a step holds at most the rows `BatchCost` says fit in
`STEP_MS`; a prompt past that is prefilled over more steps, each one of which streams the others'
tokens. Prefill is about linear in rows past a few dozen, so a smaller chunk costs it little.

The cost model comes from timings taken at start; a step that took longer than it foretold (the
machine got busier) makes the next ones smaller, by the ratio seen, until steps fit again.
"""

from __future__ import annotations

from whiz.engine.speculative import BatchCost

STEP_MS = 400.0
"""Most milliseconds one step should take while other requests wait on it: several steps of a
long prefill fit between two tokens a reader would call a stall."""
MOST_SLOWER = 16.0
"""How much slower than its start-up timings the machine is ever taken to be."""


class StepBudget:
    """`rows()`: the most rows a step shares with waiting requests; `observed()` corrects it."""

    def __init__(self, cost: BatchCost, *, step_ms: float = STEP_MS, most_rows: int = 512):
        self.cost = cost
        self.step_ms = step_ms
        self.most_rows = most_rows
        self.slower = 1.0
        """Observed step time over foretold, smoothed; never below 1 (the start-up timings are
        the machine at its fastest, so a busy start makes steps smaller, never larger)."""

    def rows(self) -> int:
        """The most rows whose batch is foretold to fit `step_ms` (at least 1: every step moves)."""
        lo, hi = 1, self.most_rows
        while lo < hi:  # the cost grows with the rows: the largest n that fits
            mid = (lo + hi + 1) // 2
            if self.cost(mid) * self.slower <= self.step_ms:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def observed(self, n_rows: int, ms: float) -> None:
        """A step of `n_rows` rows took `ms`: follow the machine's pace."""
        if n_rows <= 0:
            return
        ratio = ms / max(self.cost(n_rows), 1e-6)
        self.slower = min(MOST_SLOWER, max(1.0, self.slower + 0.5 * (ratio - self.slower)))
