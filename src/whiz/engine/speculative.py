"""Verifying a draft against the model's own logits, and choosing how long drafts should be.

The scheduler decodes [last token, d1..dk] in one batch with logits at every row. Row i holds the
model's distribution for the token after d_i (row 0: after the last token). Verification walks the
rows: at temperature 0 a draft token is kept while it equals the argmax, so the output is
token-for-token what plain greedy decoding writes. With sampling, the standard speculative rule
for a deterministic draft keeps d with probability p(d) and otherwise draws from p with d removed,
so the output distribution is exactly the model's. Either way the first row that disagrees (or the
row after the last draft token) yields one more token, so every step makes progress.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from whiz.engine.sampling import candidates
from whiz.engine.types import SamplingParams


@dataclass(frozen=True)
class Verdict:
    accepted: int
    """How many draft tokens the model agreed with."""
    tokens: list[int]
    """The tokens this step produced: the accepted draft, then one token of the model's own."""


def verify(
    draft: Sequence[int], logits: Sequence[np.ndarray], params: SamplingParams, rng: np.random.Generator
) -> Verdict:
    """Check `draft` against rows of logits (len(draft) + 1 of them)."""
    out: list[int] = []
    for i, row in enumerate(logits):
        proposed = draft[i] if i < len(draft) else None
        if params.temperature <= 0:
            token = int(np.argmax(row))
            if token == proposed:
                out.append(token)
                continue
            out.append(token)
            return Verdict(i, out)
        ids, p = candidates(row, params)
        if proposed is not None:
            hit = np.nonzero(ids == proposed)[0]
            p_draft = float(p[hit[0]]) if hit.size else 0.0
            if rng.random() < p_draft:
                out.append(int(proposed))
                continue
            if hit.size:  # draw from the residual: p without the rejected token
                p = p.copy()
                p[hit[0]] = 0.0
        cdf = np.cumsum(p)
        pick = min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), p.size - 1)
        out.append(int(ids[pick]))
        return Verdict(i, out)
    raise ValueError("verify needs one more row of logits than draft tokens")


class DraftLength:
    """How many tokens to draft next, from how the last drafts fared.

    A verified batch of k+1 rows costs far less than k+1 decode steps but more than one, so long
    drafts pay while they hit and cost while they miss. The length doubles after a fully accepted
    draft and shrinks to just past what was accepted after a miss; after repeated clean misses
    drafting pauses for a while, then probes with a short draft, so where drafts never hit the
    overhead stays a few percent.
    """

    def __init__(self, start: int = 8, *, max_len: int = 32, min_len: int = 2, pause_steps: int = 16):
        self.k = start
        self.max_len = max_len
        self.min_len = min_len
        self.pause_steps = pause_steps
        self._misses = 0
        self._paused = 0
        self._pause_len = pause_steps

    def next(self) -> int:
        """The draft length for this step (0 while paused)."""
        if self._paused > 0:
            self._paused -= 1
            return 0
        return self.k

    def update(self, proposed: int, accepted: int) -> None:
        if proposed == 0:
            return
        if accepted == proposed:
            self.k = min(self.k * 2, self.max_len)
            self._misses = 0
            self._pause_len = self.pause_steps
        elif accepted == 0:
            self._misses += 1
            self.k = self.min_len
            if self._misses >= 2:
                self._paused = self._pause_len
                self._pause_len = min(self._pause_len * 2, 256)
                self._misses = 0
        else:
            self.k = max(self.min_len, min(self.max_len, accepted + 2))
            self._misses = 0
