"""The one thread that runs llama.cpp's decodes, for every runtime in the process.

llama.cpp's CPU backend (built with OpenMP) runs each decode as a parallel region, and libgomp
keeps a team of threads for each thread that ever started one, for as long as that thread lives.
Once the teams hold more threads than the machine has CPUs, libgomp stops spinning at barriers
and puts the threads to sleep at each of them instead, about two thousand times per token for the
0.5B. A runtime decoded on the thread that loaded it (timing batches) and then on the engine's
worker thread, and from then on every token cost 2.6x a lone decode's time on 2 cores. So every
decode, of every runtime, goes through this thread: one team, whatever thread asks.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any


class ComputeThread:
    """Runs callables on one long-lived thread and hands back their results (or exceptions)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="whiz-llama", daemon=True)
        self._thread.start()

    @property
    def ident(self) -> int | None:
        return self._thread.ident

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on this thread; directly when already on it (no hand-off, no deadlock)."""
        if threading.get_ident() == self._thread.ident:
            return fn(*args)
        reply: queue.SimpleQueue = queue.SimpleQueue()
        self._jobs.put((fn, args, reply))
        try:
            ok, value = reply.get()
        except BaseException:
            # Interrupted (Ctrl-C, a test's timeout) while the call runs on the other thread: it
            # uses the caller's objects (a context the caller would free next), so wait it out, as
            # the caller would have waited had it made the call itself.
            while True:
                try:
                    reply.get()
                    break
                except BaseException:
                    continue
            raise
        if ok:
            return value
        raise value

    def _serve(self) -> None:
        while True:
            fn, args, reply = self._jobs.get()
            try:
                reply.put((True, fn(*args)))
            except BaseException as exc:  # the caller raises it, on its own thread
                reply.put((False, exc))


def compute_thread(llama_cpp) -> ComputeThread:
    """The process's compute thread, kept on the llama_cpp module: OpenMP's teams are per process,
    so one thread per runtime (the engine's model and its draft model) would bring the sleeps back.
    """
    kept = getattr(llama_cpp, "_whiz_compute_thread", None)
    if kept is None or not kept._thread.is_alive():  # not alive: a forked child has no threads
        kept = ComputeThread()
        llama_cpp._whiz_compute_thread = kept
    return kept
