"""What work costs, for tests that compare a size with a larger one instead of timing the wall clock.

CPU time of the thread that does the work (`time.thread_time`) does not count the time a loaded
machine spends on other processes, and a ratio of two sizes measured side by side cancels out how
fast the machine is: work linear in its size grows about as much as the size, quadratic work as
its square."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


def thread_cpu_s(work: Callable[[], object], repeats: int = 3) -> float:
    """The least CPU time of this thread `work()` took in `repeats` runs (garbage collection off)."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.thread_time()
            work()
            best = min(best, time.thread_time() - start)
    finally:
        gc.enable()
    return best


def growth(work_of_size: Callable[[int], Callable[[], object]], size: int, factor: int = 4) -> float:
    """How many times the CPU time of `work_of_size(n)()` grows from `size` to `factor * size`."""
    return thread_cpu_s(work_of_size(factor * size)) / thread_cpu_s(work_of_size(size))
