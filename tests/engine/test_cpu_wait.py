"""Work is waited for by the CPU time it spends: a call that spends its budget is given up on, one
that only waits (a loaded machine) is waited for up to ten times the budget by the clock, and a
child process's CPU time is read from the system as it spins."""

from __future__ import annotations

import multiprocessing
import threading

from whiz.engine.cpu_wait import WALL_FACTOR, ProcessCpu, thread_spent, wait_spending


def test_work_that_spends_its_budget_is_given_up_on_at_once_whatever_the_clock_says():
    readings = iter([0.4, 0.8, 1.2])  # read after each wait, none before the first
    asked: list[float] = []

    def ready(timeout_s: float) -> bool:
        asked.append(timeout_s)
        return False

    assert not wait_spending(ready, lambda: next(readings), budget_s=1.0)
    # Each wait is for what is left of the budget, and the third reading is past it.
    assert [round(t, 1) for t in asked] == [1.0, 0.6, 0.2]


def test_work_that_spends_nothing_is_waited_for_up_to_the_clocks_cap():
    waited: list[float] = []

    def ready(timeout_s: float) -> bool:
        waited.append(timeout_s)
        return len(waited) == 3

    assert wait_spending(ready, lambda: 0.0, budget_s=0.01)
    assert len(waited) == 3
    assert not wait_spending(lambda s: False, lambda: 0.0, budget_s=0.01)  # ends at the cap
    assert WALL_FACTOR >= 5


def _spin(stop) -> None:
    while not stop.is_set():
        pass


def test_a_spinning_childs_cpu_time_grows_and_an_idle_threads_does_not():
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    child = ctx.Process(target=_spin, args=(stop,), daemon=True)
    child.start()
    cpu = ProcessCpu(child.pid)
    try:
        spent = cpu.spent()
        assert wait_spending(lambda s: False, spent, budget_s=0.05) is False
        assert spent() >= 0.05
    finally:
        stop.set()
        child.join(timeout=30)
        cpu.close()
    idle = threading.Event()
    thread = threading.Thread(target=idle.wait, daemon=True)
    thread.start()
    spent = thread_spent(thread.ident)
    wait_spending(lambda s: False, spent, budget_s=0.02)  # 0.2 s by the clock, asleep throughout
    assert spent() < 0.02
    idle.set()
