"""Where a task's seconds went: the phases add up to its total, whatever the events say."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from whiz.agent.models.scripted_model import ScriptedModel
from whiz.bench.agent import VARIANTS, dir_case, run_suite
from whiz.bench.dir_tasks import load_tasks
from whiz.bench.phases import PhaseClock, line, summed
from whiz.modes.candidates import ScriptedCandidates
from whiz.modes.pool import ScriptedPool


def started(item_id: str, kind: str, **fields) -> dict:
    return {"type": "item.started", "item": {"id": item_id, "type": kind, **fields}}


def completed(item_id: str, kind: str, **fields) -> dict:
    return {"type": "item.completed", "item": {"id": item_id, "type": kind, **fields}}


def test_each_phase_takes_its_own_seconds_and_the_overhead_is_the_rest():
    clock = PhaseClock()
    deep = {"model": "deep", "call_ms": 8000.0, "open_ms": 3000.0, "prefill_tokens": 900,
            "prefill_ms": 2000.0, "decode_tokens": 200, "decode_ms": 5500.0,
            "cached_tokens": 100}  # fmt: skip
    fast = {"model": "fast", "call_ms": 1000.0, "open_ms": 0.0, "decode_tokens": 40, "decode_ms": 800.0}
    events = [
        (3.0, started("a", "agent_message")),
        (11.0, completed("a", "agent_message", whiz=deep)),
        (11.5, completed("b", "agent_message", whiz=fast)),
        (12.0, started("c", "command_execution")),
        (14.0, completed("c", "command_execution")),  # 2 s of checks
        (15.5, completed("l", "localize", ms=1500.0)),  # before a round: localizing
        (16.0, started("h", "heal")),
        (18.0, completed("l2", "localize", ms=1000.0)),  # inside the round: still localizing
        (23.0, completed("h", "heal", candidates_ms=4000.0)),  # 7 s round: 4 writing, 1 asking, 2 tests
        (23.5, completed("x", "agent_message", whiz={"prefill_ms": 5.0})),  # no client timings
    ]
    for at, event in events:
        clock.see(at, event)
    p = clock.phases(25.0)
    parts = p.parts()
    assert parts == pytest.approx(
        {
            "model_deep": 8.0,
            "model_fast": 1.0,
            "open": 3.0,
            "localize": 2.5,
            "candidates": 4.0,
            "checks": 4.0,
            "overhead": 2.5,
        }  # fmt: skip
    )
    assert sum(parts.values()) == pytest.approx(25.0)
    assert (p.calls, p.prefill_tokens, p.decode_tokens, p.cached_tokens) == (
        {"deep": 1, "fast": 1},
        900,
        240,
        100,
    )
    assert p.prefill_s == pytest.approx(2.0) and p.decode_s == pytest.approx(6.3)
    said = line(p.as_dict())
    assert said.startswith("deep 1x 8.0 s, fast 1x 1.0 s (prefill 900 tok 2.0 s")
    assert "checks 4.0 s" in said and "overhead 2.5 s" in said


def test_a_task_with_no_timed_events_is_all_overhead():
    p = PhaseClock().phases(4.0)
    assert p.parts() == {"open": 0.0, "localize": 0.0, "candidates": 0.0, "checks": 0.0, "overhead": 4.0}


def test_the_summary_gives_each_phase_its_median_and_share():
    runs = [
        {**PhaseClock().phases(10.0).as_dict(), "model_s": {"deep": 6.0}, "overhead_s": 4.0},
        {**PhaseClock().phases(20.0).as_dict(), "model_s": {"deep": 10.0}, "overhead_s": 10.0},
    ]
    out = summed(runs)
    assert list(out)[0] == "model_deep"
    assert out["model_deep"] == {"median_s": 8.0, "mean_s": 8.0, "share": 0.55}
    assert out["overhead"]["share"] == pytest.approx(0.45)


async def test_a_real_session_over_a_scripted_model_accounts_for_every_second(tmp_path):
    folder = tmp_path / "tasks" / "last"
    (folder / "files").mkdir(parents=True)
    (folder / "judge").mkdir()
    (folder / "files" / "solution.py").write_text("def last(xs):\n    return xs[len(xs)]\n")
    (folder / "judge" / "check.py").write_text("from solution import last\nassert last([1, 2]) == 2\n")
    spec = {"task": "Fix the bug in the function last in solution.py", "judge": "{python} check.py"}
    (folder / "task.json").write_text(json.dumps(spec))
    fixed = "solution.py\n```python\ndef last(xs):\n    return xs[-1]\n```\n"
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel([fixed])})
    results = await run_suite(
        [dir_case(load_tasks(tmp_path / "tasks")[0])], [VARIANTS["fast"]], pool, say=lambda line: None
    )
    run = results["fast"]["seeds"][0]["runs"][0]
    assert run["passed"] is True
    phases = run["phases"]
    assert phases["calls"] == {"fast": 1}  # the one reply, and which model gave it
    parts = [
        *phases["model_s"].values(),
        *(phases[f"{k}_s"] for k in ("open", "localize", "candidates", "checks", "overhead")),
    ]
    assert sum(parts) == pytest.approx(run["seconds"], abs=0.01)  # each part rounded to the ms
    assert results["fast"]["summary"]["phases"]["model_fast"]["median_s"] == pytest.approx(
        phases["model_s"]["fast"], abs=0.001
    )


async def test_a_healing_step_is_counted_as_its_candidates_and_their_test_runs(tmp_path):
    folder = tmp_path / "tasks" / "last"
    (folder / "files").mkdir(parents=True)
    (folder / "files" / "solution.py").write_text("def last(xs):\n    return xs[len(xs)]\n")
    (folder / "files" / "check.py").write_text("from solution import last\nassert last([1, 2]) == 2\n")
    spec = {"task": "Fix the bug in the function last in solution.py", "judge": "{python} check.py",
            "test_cmd": "{python} check.py"}  # fmt: skip
    (folder / "task.json").write_text(json.dumps(spec))
    good = "solution.py\n```python\ndef last(xs):\n    return xs[-1]\n```\n"
    candidates = ScriptedCandidates([[good] * 5] * 4)
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel([good])}, sources={"fast": candidates})
    heal = replace(VARIANTS["heal"], with_tests=True)
    results = await run_suite(
        [dir_case(load_tasks(tmp_path / "tasks")[0])], [heal], pool, say=lambda line: None
    )
    run = results["heal@5"]["seeds"][0]["runs"][0]
    assert run["passed"] is True
    phases = run["phases"]
    # The healing step wrote the edit (no call of the agent's own; scripted candidates take no
    # time to write), and the test runs, each a fresh interpreter, chose it.
    assert phases["model_s"] == {} and phases["checks_s"] > 0
    parts = [
        *phases["model_s"].values(),
        *(phases[f"{k}_s"] for k in ("open", "localize", "candidates", "checks", "overhead")),
    ]
    assert sum(parts) == pytest.approx(run["seconds"], abs=0.01)
    assert min(parts) >= 0
