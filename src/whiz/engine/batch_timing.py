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
    rounds: int = 2,
    extra_rounds: int = 1,
    agree: float = 0.5,
    clock: Callable[[], float] = time.perf_counter,
    plausible: Callable[[dict[int, float]], bool] | None = None,
    retries: int = 2,
) -> dict[int, float]:
    """The fastest of each size's timings (ms) of `run(n)`, a batch of n rows.

    `rounds` rounds time every size. A size whose two fastest samples still differ by more than
    `agree` met other work in one of them, and the lower may have too: it is timed again, in up to
    `extra_rounds` more rounds of such sizes alone. Timing costs about a second on one thread, each
    start of a server, so a quiet machine does no more than `rounds` of it.

    Other work that comes and goes meets the long batches more often than the short ones, so
    every sample of a large batch can be slow alike (steady, by `agree`) while the single rows
    are timed quiet. Where the costs are not `plausible` (drafting looks as if it could never
    pay, where a quiet CPU's batches cost a fraction of their rows one by one), every size is
    timed again, up to `retries` more rounds, each keeping its fastest sample.
    """
    samples: dict[int, list[float]] = {n: [] for n in sizes}

    def sample(n: int) -> None:
        start = clock()
        run(n)
        samples[n].append((clock() - start) * 1000)

    unsteady = list(sizes)
    for done in range(rounds + extra_rounds):
        for n in unsteady:
            sample(n)
        if done + 1 >= rounds:
            unsteady = [n for n in sizes if not _steady(samples[n], agree)]
            if not unsteady:
                break
    costs = {n: min(s) for n, s in samples.items()}
    for _ in range(retries if plausible is not None else 0):
        if plausible(costs):
            break
        for n in sizes:
            sample(n)
        costs = {n: min(s) for n, s in samples.items()}
    return costs


def _steady(samples: list[float], agree: float) -> bool:
    low, second = sorted(samples)[:2]
    return second <= low * (1 + agree)
