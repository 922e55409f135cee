"""Timing batches of a few sizes when an engine starts, robust to what else the machine is doing.

The timings decide for the server's whole life whether drafting pays and how long drafts are
(`speculative.BatchCost`). A burst of other work (a build, a test worker starting) only ever adds
time, so each size keeps its fastest sample; and the sizes are timed in turns, round after round,
so that a burst spans samples of several sizes instead of every sample of one. Timing one size
twice in a row lets a burst of a second inflate that size alone, and a 16-row batch that looks as
slow as 16 single rows turns drafting off until the server restarts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

SIZES = (1, 4, 16, 33)


def time_batches(
    run: Callable[[int], object],
    sizes: Sequence[int] = SIZES,
    *,
    min_rounds: int = 2,
    max_rounds: int = 5,
    agree: float = 0.15,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[int, float]:
    """The fastest of each size's timings (ms) of `run(n)`, a batch of n rows.

    Rounds go on past `min_rounds` while some size's two fastest samples differ by more than
    `agree`: one of them met other work, and the lower may have too. A quiet machine stops after
    `min_rounds`; a busy one spends at most `max_rounds`.
    """
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    for done in range(1, max_rounds + 1):
        for n in sizes:
            start = clock()
            run(n)
            samples[n].append((clock() - start) * 1000)
        if done >= min_rounds and all(_steady(s, agree) for s in samples.values()):
            break
    return {n: min(s) for n, s in samples.items()}


def _steady(samples: list[float], agree: float) -> bool:
    low, second = sorted(samples)[:2]
    return second <= low * (1 + agree)
