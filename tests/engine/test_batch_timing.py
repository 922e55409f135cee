"""Timing batches at start-up: a burst of other work must not decide drafting for the server's life."""

from __future__ import annotations

import pytest

from whiz.engine.batch_timing import time_batches
from whiz.engine.speculative import BatchCost, DraftLength

# A 1-thread 0.5B on a 2-core AVX2 machine: 4 rows cost about 4 single rows; 16 rows far fewer.
TRUE_MS = {1: 22.0, 4: 105.0, 16: 170.0, 33: 410.0}


class Machine:
    """A clock and a batch runner; from `burst_at` (ms) for `burst_ms`, everything is 3x slower."""

    def __init__(self, burst_at: float | None = None, burst_ms: float = 0.0, slowdown: float = 1.0):
        self.now = 0.0
        self.burst = (burst_at, (burst_at or 0.0) + burst_ms)
        self.slowdown = slowdown
        self.runs: list[int] = []

    def clock(self) -> float:
        return self.now / 1000

    def run(self, n: int) -> None:
        self.runs.append(n)
        factor = self.slowdown
        start, end = self.burst
        if start is not None and start <= self.now < end:
            factor *= 3
        self.now += TRUE_MS[n] * factor


def timed(machine: Machine) -> dict[int, float]:
    return time_batches(machine.run, clock=machine.clock)


def test_a_quiet_machine_takes_two_rounds_and_gets_the_true_costs():
    machine = Machine()
    assert timed(machine) == pytest.approx(TRUE_MS)
    assert len(machine.runs) == 2 * len(TRUE_MS)


def test_a_burst_over_one_sizes_first_samples_changes_no_draft_length():
    # The burst starts as the first 16-row batch does and lasts as long as two of them, slowed:
    # with each size timed twice in a row, 16 rows would read 510 ms both times.
    machine = Machine(burst_at=TRUE_MS[1] + TRUE_MS[4], burst_ms=2 * 3 * TRUE_MS[16])
    costs = timed(machine)
    assert costs == pytest.approx(TRUE_MS)
    quiet = DraftLength(BatchCost(TRUE_MS), prior=0.95).best()
    assert DraftLength(BatchCost(costs), prior=0.95).best() == quiet >= 12


def test_only_the_sizes_a_burst_met_are_timed_again():
    machine = Machine(burst_at=TRUE_MS[1] + TRUE_MS[4], burst_ms=2 * 3 * TRUE_MS[16])
    timed(machine)
    assert machine.runs == [1, 4, 16, 33] * 2 + [16, 33]


def test_a_burst_over_the_whole_first_round_takes_a_third():
    machine = Machine(burst_at=0.0, burst_ms=3 * sum(TRUE_MS.values()))
    assert timed(machine) == pytest.approx(TRUE_MS)
    assert len(machine.runs) == 3 * len(TRUE_MS)


def test_a_machine_that_never_settles_is_timed_three_rounds_at_most():
    class Slowing(Machine):
        def run(self, n: int) -> None:  # each batch slower than the last
            self.slowdown = 1 + 0.5 * len(self.runs)
            super().run(n)

    machine = Slowing()
    costs = timed(machine)
    assert len(machine.runs) == 3 * len(TRUE_MS)
    assert costs[1] == pytest.approx(TRUE_MS[1])  # each size's first, fastest sample


def test_a_machine_busy_at_a_steady_rate_keeps_the_ratios():
    machine = Machine(slowdown=2.0)
    costs = timed(machine)
    assert len(machine.runs) == 2 * len(TRUE_MS)
    assert {n: ms / 2 for n, ms in costs.items()} == pytest.approx(TRUE_MS)


def test_large_batches_slowed_alike_in_every_sample_are_timed_again_until_drafting_can_pay():
    # Work that comes and goes meets the long batches, not the single rows: both samples of 16
    # and 33 rows read four times their cost, alike, so neither is timed again as unsteady.
    class Intermittent(Machine):
        def run(self, n: int) -> None:
            self.slowdown = 4.0 if n >= 16 and self.runs.count(n) < 2 else 1.0
            super().run(n)

    def pays(costs: dict[int, float]) -> bool:
        return not DraftLength(BatchCost(costs)).hopeless

    alone = Intermittent()
    assert not pays(time_batches(alone.run, clock=alone.clock))  # as it was: drafting off for good
    machine = Intermittent()
    costs = time_batches(machine.run, clock=machine.clock, plausible=pays)
    assert costs == pytest.approx(TRUE_MS) and pays(costs)
    assert len(machine.runs) == 3 * len(TRUE_MS)  # one more round of every size
    quiet = Machine()
    time_batches(quiet.run, clock=quiet.clock, plausible=pays)
    assert len(quiet.runs) == 2 * len(TRUE_MS)  # plausible at once: no more rounds
