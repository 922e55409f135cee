"""Choosing the next token from logits.

Greedy decoding is argmax, so that temperature 0 is exactly reproducible (the speculative
decoder relies on that). Sampling applies temperature, then top-k, then top-p, and draws from a
per-request generator, so a given seed repeats.
"""

from __future__ import annotations

import numpy as np

from whiz.engine.types import SamplingParams


def probabilities(logits: np.ndarray, params: SamplingParams) -> np.ndarray:
    """The distribution the sampler draws from, after temperature, top-k and top-p."""
    x = logits.astype(np.float64) / max(params.temperature, 1e-6)
    if 0 < params.top_k < x.size:
        cut = np.partition(x, -params.top_k)[-params.top_k]
        x = np.where(x >= cut, x, -np.inf)
    x -= x.max()
    p = np.exp(x)
    p /= p.sum()
    if params.top_p < 1.0:
        order = np.argsort(-p)
        cumulative = np.cumsum(p[order])
        # Keep the smallest set whose mass reaches top_p (always at least one token).
        n_keep = int(np.searchsorted(cumulative, params.top_p) + 1)
        mask = np.zeros_like(p, dtype=bool)
        mask[order[:n_keep]] = True
        p = np.where(mask, p, 0.0)
        p /= p.sum()
    return p


def sample(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
    """Pick the next token id."""
    if params.temperature <= 0:
        return int(np.argmax(logits))
    p = probabilities(logits, params)
    return int(rng.choice(p.size, p=p))
