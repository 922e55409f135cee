"""The thread governor: a decode leaves a core to each other program that keeps one busy."""

from __future__ import annotations

import os
from pathlib import Path

from whiz.engine.threads import ProcLoad, ThreadGovernor


class Probe:
    def __init__(self, *values: float | None):
        self.values = list(values)

    def others_running(self) -> float | None:
        return self.values.pop(0) if len(self.values) > 1 else self.values[0]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0  # every call a new sample
        return self.now


def governor(probe, most=2, cores=2, **kw) -> ThreadGovernor:
    return ThreadGovernor(most, cores=cores, probe=probe, clock=Clock(), **kw)


def test_all_threads_on_a_quiet_machine():
    assert [governor(Probe(0)).threads() for _ in range(3)] == [2, 2, 2]


def test_a_program_that_keeps_a_core_busy_takes_a_thread_away_and_gives_it_back_when_done():
    g = governor(Probe(*[1] * 8, *[0] * 8), window=4)
    seen = [g.threads() for _ in range(16)]
    assert seen[:8] == [1] * 8
    assert seen[-1] == 2  # once the samples of the busy program have left the window


def test_a_short_burst_of_other_work_changes_nothing():
    g = governor(Probe(0, 0, 0, 0, 0, 0, 0, 1, 0, 0), window=8)
    assert [g.threads() for _ in range(10)] == [2] * 10


def test_never_fewer_than_one_and_never_more_than_given():
    assert governor(Probe(5), most=4, cores=4).threads() == 1
    assert governor(Probe(0), most=1, cores=8).threads() == 1


def test_without_a_reading_the_count_stays_as_given():
    assert governor(Probe(None), most=2).threads() == 2


def test_samples_at_most_every_interval():
    calls = []

    class Counting:
        def others_running(self):
            calls.append(1)
            return 0

    g = ThreadGovernor(2, cores=2, probe=Counting(), every_s=10.0)
    for _ in range(100):
        g.threads()
    assert len(calls) == 1


def _fake_proc(tmp_path: Path, cpus: int, running: int, own_states: list[str]) -> Path:
    lines = ["cpu  1 2 3 4"] + [f"cpu{i} 1 2 3 4" for i in range(cpus)] + [f"procs_running {running}"]
    (tmp_path / "stat").write_text("\n".join(lines) + "\n")
    (tmp_path / "loadavg").write_text(f"0.50 0.40 0.30 {running}/245 1234\n")
    for k, state in enumerate(own_states):
        task = tmp_path / "self" / "task" / str(100 + k)
        task.mkdir(parents=True)
        (task / "stat").write_text(f"{100 + k} (whiz (llama) R) {state} 1 2 3\n")
    return tmp_path


def test_proc_load_counts_other_processes_tasks_only(tmp_path):
    ours = len(os.sched_getaffinity(0))
    proc = _fake_proc(tmp_path, ours, running=4, own_states=["R", "R", "S", "S"])
    assert ProcLoad(proc).others_running() == 2


def test_proc_load_is_not_trusted_where_proc_stat_is_another_machines(tmp_path):
    """In a container /proc/stat may list the host's CPUs: its running count is the host's."""
    ours = len(os.sched_getaffinity(0))
    probe = ProcLoad(_fake_proc(tmp_path, ours + 30, running=40, own_states=["R"]))
    assert probe.others_running() is None
    assert ThreadGovernor(2, cores=2, probe=probe).threads() == 2


def test_without_an_affinity_mask_the_cpu_count_is_the_cores(monkeypatch, tmp_path):
    """macOS has no sched_getaffinity (nor /proc): the runtime must still start, threads fixed."""
    monkeypatch.delattr(os, "sched_getaffinity")
    g = ThreadGovernor(2, probe=ProcLoad(tmp_path))  # an empty folder: no /proc to read
    assert g.cores == (os.cpu_count() or 1) and g.threads() == 2
