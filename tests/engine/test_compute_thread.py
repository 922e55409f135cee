"""The compute thread: every call runs on one thread, whichever thread asks (see compute_thread.py)."""

from __future__ import annotations

import signal
import threading
import types

import pytest

from whiz.engine.compute_thread import ComputeThread, compute_thread


def test_calls_from_any_thread_run_on_the_one_thread():
    worker = ComputeThread()
    seen = []
    callers = [
        threading.Thread(target=lambda: seen.append(worker.call(threading.get_ident))) for _ in range(3)
    ]
    seen.append(worker.call(threading.get_ident))
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert set(seen) == {worker.ident} and worker.ident != threading.get_ident()


def test_a_failure_reaches_the_caller_and_the_thread_goes_on():
    worker = ComputeThread()
    with pytest.raises(ZeroDivisionError):
        worker.call(lambda: 1 / 0)
    assert worker.call(lambda a, b: a + b, 2, 3) == 5


def test_a_call_from_the_thread_itself_runs_in_place():
    worker = ComputeThread()
    assert worker.call(lambda: worker.call(lambda: "inner")) == "inner"


def test_one_thread_per_process_shared_by_every_runtime():
    module = types.SimpleNamespace()
    assert compute_thread(module) is compute_thread(module)


class Interrupted(Exception):
    pass


def test_an_interrupted_caller_waits_for_the_call_to_finish():
    # The call uses the caller's objects: returning early would let the caller free them mid-call
    # (a test's timeout did, and the context was freed under a running decode).
    worker = ComputeThread()
    finished = threading.Event()

    def slow():
        threading.Event().wait(0.3)
        finished.set()

    def interrupt(signum, frame):
        raise Interrupted

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(Interrupted):
            worker.call(slow)
        assert finished.is_set()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
