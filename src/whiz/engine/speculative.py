"""Verifying a draft against the model's own logits, and choosing how long drafts should be.

The scheduler decodes [last token, d1..dk] in one batch with logits at every row. Row i holds the
model's distribution for the token after d_i (row 0: after the last token). Verification walks the
rows: at temperature 0 a draft token is kept while it equals the argmax, so the output is
token-for-token what plain greedy decoding writes. With sampling, the standard speculative rule
for a deterministic draft (every drafter here proposes one token, not a distribution) keeps d with
probability p(d) and otherwise draws from p with d removed. whiz draws it the way plain sampling
draws: sample y from p with the row's one random number and keep d while y == d; the first y that
differs is the draw from p without d. Same distribution, and, because each emitted token uses
exactly one random number in order, with a seed the output is token-for-token what plain sampling
writes. Either way the first row that disagrees (or the row after the last draft token) yields one
more token, so every step makes progress.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from whiz.engine.grammar import Constraint
from whiz.engine.sampling import sample
from whiz.engine.types import SamplingParams


@dataclass(frozen=True)
class Verdict:
    accepted: int
    """How many draft tokens the model agreed with."""
    tokens: list[int]
    """The tokens this step produced: the accepted draft, then one token of the model's own."""


def verify(
    draft: Sequence[int],
    logits: Sequence[np.ndarray],
    params: SamplingParams,
    rng: np.random.Generator,
    constraint: Constraint | None = None,
) -> Verdict:
    """Check `draft` against rows of logits (len(draft) + 1 of them).

    With a `constraint`, each row's token is the one the grammar allows as plain decoding picks
    it, and the constraint follows each token kept: a draft token the grammar forbids never is.
    Matching costs time per row, so once this step's rows have taken the constraint's budget for
    one token the rest of the draft waits for the next step, as if the model had stopped agreeing
    there: the tokens made so far are those plain decoding makes, only fewer of them this step."""
    out: list[int] = []
    t0 = constraint.clock() if constraint is not None else 0.0  # the budget's clock
    for i, row in enumerate(logits):
        if constraint is None:
            token = sample(row, params, rng)
        else:
            token = constraint.pick(row, params, rng)
            constraint.accept(token)
        out.append(token)
        if i >= len(draft) or token != draft[i]:
            return Verdict(i, out)
        if constraint is not None and (constraint.clock() - t0) * 1000 > constraint.budget_ms:
            return Verdict(i, out)  # the last token is the model's own; the draft after it waits
    raise ValueError("verify needs one more row of logits than draft tokens")


class BatchCost:
    """How long a batch of n rows takes, interpolated from a few timings (ms).

    Measured when the engine starts, because the ratio that matters (a batch of 16 rows against
    one row) differs threefold between CPUs: about 3x on an AVX-512 machine, about 11x on an
    AVX2-only one. Drafting that pays on one can lose on the other.
    """

    def __init__(self, points: dict[int, float]):
        self.points = sorted(points.items())

    def __call__(self, n: int) -> float:
        pts = self.points
        if n <= pts[0][0]:
            return pts[0][1]
        for (n0, c0), (n1, c1) in zip(pts, pts[1:], strict=False):
            if n <= n1:
                return c0 + (c1 - c0) * (n - n0) / (n1 - n0)
        (n0, c0), (n1, c1) = pts[-2], pts[-1]
        return c1 + (c1 - c0) * (n - n1) / (n1 - n0)


class DraftLength:
    """How many tokens to draft next: the length with the most expected tokens per millisecond.

    With a per-token acceptance rate a, a draft of k tokens yields (1 - a^(k+1)) / (1 - a) tokens
    (the accepted run plus the model's own token) for the cost of a k+1-row batch, plus
    `draft_token_ms` for each drafted token where drafting itself costs (a draft model; text
    lookups are free). The rate is a running estimate from this request's verified drafts. When no
    length beats plain decoding, drafting pauses, then probes again with a short draft, so where
    drafts keep missing the overhead stays a few percent.
    """

    LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)

    def __init__(
        self,
        cost: BatchCost,
        *,
        max_len: int = 32,
        prior: float = 0.6,
        pause_steps: int = 16,
        draft_token_ms: float = 0.0,
    ):
        self.cost = cost
        self.max_len = max_len
        self.draft_token_ms = draft_token_ms
        self.rate = prior
        self.pause_steps = pause_steps
        self._paused = 0
        self._pause_len = pause_steps
        self.hopeless = self.best(self.MAX_RATE) == 0
        """Drafting would not pay even if nearly every token were accepted (a draft model about
        as slow as the model, or batches that cost as much as their rows one by one): never
        draft, not even to probe, since probing costs time and can change nothing."""

    MAX_RATE = 0.995

    def best(self, rate: float | None = None) -> int:
        """The most productive draft length at `rate` (default: the running estimate); 0: none."""
        a = min(self.rate if rate is None else rate, self.MAX_RATE)
        plain = 1 / self.cost(1)
        best_k, best_speed = 0, plain
        for k in self.LENGTHS:
            if k > self.max_len:
                break
            speed = (1 - a ** (k + 1)) / (1 - a) / (self.cost(k + 1) + k * self.draft_token_ms)
            if speed > best_speed * 1.02:  # a margin: a draft must clearly pay
                best_k, best_speed = k, speed
        return best_k

    def next(self) -> int:
        """The draft length for this step (0: decode plainly)."""
        if self.hopeless:
            return 0
        if self._paused > 0:
            self._paused -= 1
            return 0 if self._paused else 2  # the last paused step probes
        k = self.best()
        if k == 0:
            self._paused = self._pause_len
            self._pause_len = min(self._pause_len * 2, 256)
        return k

    def update(self, proposed: int, accepted: int) -> None:
        if proposed == 0:
            return
        trials = accepted + (1 if accepted < proposed else 0)
        observed = accepted / trials
        # Weight by evidence: a long run of hits says more than one short miss.
        weight = min(0.5, 0.1 * trials)
        self.rate += weight * (observed - self.rate)
        if accepted == proposed:
            self._pause_len = self.pause_steps
