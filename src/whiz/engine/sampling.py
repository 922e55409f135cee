"""Choosing the next token from logits.

Greedy decoding is argmax, so that temperature 0 is exactly reproducible (the speculative
decoder relies on that). Sampling applies temperature, then top-k, then top-p, and draws from a
per-request generator, so a given seed repeats. With top-k set, only the k best logits are
touched: the vocabulary is 152k tokens, and a full softmax per token would cost a few percent
of decode speed.
"""

from __future__ import annotations

import numpy as np

from whiz.engine.types import SamplingParams

_NUCLEUS_CUT = 4096


def candidates(logits: np.ndarray, params: SamplingParams) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and their probabilities after temperature, top-k and top-p."""
    t = max(params.temperature, 1e-6)
    if 0 < params.top_k < logits.size:
        ids = np.argpartition(logits, -params.top_k)[-params.top_k :]
    elif params.top_p < 1.0 and logits.size > _NUCLEUS_CUT:
        # The nucleus almost always lies within the best few thousand tokens; check that it
        # does (their mass reaches top_p) before skipping the full sort, so the result is exact.
        ids = np.argpartition(logits, -_NUCLEUS_CUT)[-_NUCLEUS_CUT:]
        scaled = logits.astype(np.float64) / t
        peak = scaled[ids].max()
        if np.exp(scaled[ids] - peak).sum() / np.exp(scaled - peak).sum() < params.top_p:
            ids = np.arange(logits.size)
    else:
        ids = np.arange(logits.size)
    x = logits[ids].astype(np.float32 if ids.size > _NUCLEUS_CUT else np.float64) / t
    if params.top_p >= 1.0:
        p = np.exp(x - x.max())
        return ids, p / p.sum()
    order = np.argsort(-x)
    ids, x = ids[order], x[order]
    p = np.exp(x - x[0])
    p /= p.sum()
    # Keep the smallest set whose mass reaches top_p (always at least one token).
    n_keep = int(np.searchsorted(np.cumsum(p), params.top_p) + 1)
    return ids[:n_keep], p[:n_keep] / p[:n_keep].sum()


def probabilities(logits: np.ndarray, params: SamplingParams) -> np.ndarray:
    """The full distribution the sampler draws from, over the whole vocabulary."""
    ids, p = candidates(logits, params)
    out = np.zeros(logits.size)
    out[ids] = p
    return out


def sample(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
    """Pick the next token id."""
    if params.temperature <= 0:
        return int(np.argmax(logits))
    ids, p = candidates(logits, params)
    # Inverse CDF: rng.choice re-validates p on every call, which costs ms over 152k entries.
    cdf = np.cumsum(p)
    return int(ids[min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), p.size - 1)])
