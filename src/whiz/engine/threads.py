"""How many llama.cpp threads the next decode gets: all it may use, fewer while other work keeps
the cores busy.

llama.cpp splits each operation of a decode over its threads and waits at a barrier after every
one, about two thousand times per token. When another program keeps one of two cores busy, one
of two threads keeps losing its core and the other spins at each barrier waiting for it: the 0.5B
then decodes at 8.8 tokens/s on two threads and 14.8 on one (26.6 on two when the machine is
quiet). So before a decode the runtime asks `ThreadGovernor.threads()`, which counts the tasks of
other processes that are running or waiting for a CPU (Linux's /proc, less this process's own)
over the last few samples (a sample every 0.1 s, the last four), and leaves them a core each.

The count is only trusted where /proc/stat describes the CPUs this process may use: in a
container whose /proc/stat is the host's (more CPUs than the affinity mask), or where there is no
/proc, the thread count stays as given. The output does not depend on the thread count: llama.cpp
sums each output element on one thread, in the same order whatever the split
(tests/integration/test_batch_invariance.py checks it).
"""

from __future__ import annotations

import os
import time
from collections import deque
from pathlib import Path
from typing import Protocol


class LoadProbe(Protocol):
    def others_running(self) -> float | None:
        """Tasks of other processes running or runnable now; None when it cannot tell."""


class ProcLoad:
    """`LoadProbe` from Linux's /proc: the system's running tasks less this process's.

    About 5-25 us a thread of this process (its stat file), so the governor samples sparingly."""

    def __init__(self, proc: Path = Path("/proc")):
        self._loadavg = proc / "loadavg"
        self._tasks = proc / "self" / "task"
        self.usable = _describes_our_cpus(proc / "stat")

    def others_running(self) -> float | None:
        if not self.usable:
            return None
        try:
            # "0.58 2.02 1.96 3/245 1234": running or runnable tasks / all tasks
            running = int(self._loadavg.read_bytes().split()[3].split(b"/")[0])
            own = 0
            for task in os.scandir(self._tasks):
                own += _state(Path(task.path)) == b"R"
        except (OSError, IndexError, ValueError):
            return None
        return max(0, running - max(own, 1))


def _usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one, as on Linux)."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    return len(getaffinity(0)) if getaffinity is not None else os.cpu_count() or 1


def _describes_our_cpus(stat: Path) -> bool:
    """Whether /proc/stat lists exactly the CPUs this process may run on (not a host's)."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return False
    return _usable_cpus() == sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())


def _state(task: Path) -> bytes:
    """A thread's scheduler state letter from its stat line (after the name in parentheses)."""
    try:
        text = (task / "stat").read_bytes()
    except OSError:  # a thread that ended meanwhile
        return b""
    end = text.rfind(b")")
    return text[end + 2 : end + 3]


class ThreadGovernor:
    """Threads for the next decode, between 1 and `most`.

    Samples at most every `every_s`, keeps the last `window` samples, and leaves a core to each
    other task running on average over them: a brief burst of other work (an editor redrawing)
    changes nothing, a build running beside it takes a core for as long as it runs. Losing a core
    mid-decode costs about three times what one thread fewer does, so a half-busy core counts.
    """

    def __init__(
        self,
        most: int,
        *,
        cores: int | None = None,
        probe: LoadProbe | None = None,
        every_s: float = 0.1,
        window: int = 4,
        clock=time.monotonic,
    ):
        self.most = max(1, most)
        self.cores = cores or _usable_cpus()
        self._probe = probe if probe is not None else ProcLoad()
        self._every_s = every_s
        self._samples: deque[float] = deque(maxlen=window)
        self._clock = clock
        self._last = float("-inf")
        self._threads = self.most

    def threads(self) -> int:
        now = self._clock()
        if now - self._last < self._every_s:
            return self._threads
        self._last = now
        others = self._probe.others_running()
        if others is None:
            return self._threads
        self._samples.append(others)
        busy = sum(self._samples) / len(self._samples)
        free = self.cores - int(busy + 0.5)
        self._threads = max(1, min(self.most, free))
        return self._threads
