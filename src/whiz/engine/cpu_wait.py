"""Waiting on another thread's or process's work by the CPU time it spends, not by the clock.

A grammar call's deadline is there to stop work that would hold the engine without end, and such
work spins on a core. On a loaded machine a call that needs a few milliseconds of CPU can wait
seconds to be scheduled at all; a deadline by the clock ended it as if its grammar were hostile.
So a call is stopped once it has spent its budget of CPU time, or, starved or blocked (a C call
waiting on a lock spends nothing), once `WALL_FACTOR` times that budget has passed by the clock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

WALL_FACTOR = 10.0
"""How many times its CPU budget a call may take by the clock before it is stopped regardless."""

Spent = Callable[[], float]
"""CPU seconds the work has spent since it was handed over."""


def wait_spending(ready: Callable[[float], bool], spent: Spent, budget_s: float) -> bool:
    """Wait until `ready(timeout_s)` says the work is done (True), or until it has `spent()` its
    budget of CPU time or `WALL_FACTOR` times that by the clock (False). One thread's CPU time grows
    no faster than the clock, so waiting for what is left of the budget never overshoots it by more
    than one reading."""
    start = time.monotonic()
    wall_s = budget_s * WALL_FACTOR
    left = budget_s  # nothing spent yet: the first wait reads no clock (one call a token)
    while True:
        if ready(max(left, 0.001)):
            return True
        left = min(budget_s - spent(), wall_s - (time.monotonic() - start))
        if left <= 0:
            return False


def wall_clock() -> Spent:
    """Where the work's CPU time cannot be read: the clock stands in for it."""
    start = time.monotonic()
    return lambda: time.monotonic() - start


def thread_spent(ident: int | None) -> Spent:
    """CPU seconds a running thread spends from now on (by its CPU clock, on Linux and macOS)."""
    try:
        clock = time.pthread_getcpuclockid(ident)  # type: ignore[arg-type]
        start = time.clock_gettime(clock)
    except (AttributeError, OSError, TypeError, OverflowError):
        return wall_clock()
    return lambda: time.clock_gettime(clock) - start


class ProcessCpu:
    """A child process's CPU seconds, user and system, read from /proc (one pread a reading, so it
    is cheap enough to read before every call)."""

    def __init__(self, pid: int):
        self._tick = os.sysconf("SC_CLK_TCK")
        try:
            self._fd: int | None = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        except OSError:
            self._fd = None

    def read(self) -> float | None:
        if self._fd is None:
            return None
        try:
            stat = os.pread(self._fd, 1024, 0)
        except OSError:
            return None
        # After the command name in parentheses: state, then 10 fields, then utime and stime.
        fields = stat[stat.rindex(b")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / self._tick

    def spent(self) -> Spent:
        """CPU seconds the process spends from now on."""
        start = self.read()
        if start is None:
            return wall_clock()
        return lambda: (self.read() or start) - start

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
