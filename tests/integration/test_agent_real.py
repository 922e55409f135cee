"""The agent end to end with the real default model: `whiz heal` fixes the seeded bug of issue 18
(a task that names a function but not its file), and `whiz exec --mode auto --check` writes a
whole program that runs.

Healing samples, so its outcome depends on the seeds and on the prompt token for token. The prompts
here hold nothing that differs between machines (no temporary paths, no venv path): the test
prints its own message instead of a traceback. What can still differ is the arithmetic: another
CPU (AVX2 instead of AVX-512) rounds logits differently, and a sampled candidate can diverge. So
each test was tried here with many seeds, and asserts what held for nearly all of them.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from whiz.bench.seeded_bugs import MEAN
from whiz.commands.common import Output
from whiz.commands.heal import heal_task
from whiz.modes.endpoints import FastSettings
from whiz.modes.healing import HealSettings
from whiz.modes.session import SessionOptions

pytestmark = pytest.mark.model

# The rate over seeds is a benchmark's (`whiz bench heal --suite seeded --seeds 10`, BENCHMARKS.md:
# 10 of 10 seeds): here heal must fix the bug, and a second seed stands in only where another CPU's
# rounding makes the first seed's candidates diverge (each seed is a whole heal of five candidates).
MEAN_SEEDS = (1234, 1334)


def test_heal_fixes_the_seeded_mean_bug(real_server, tmp_path: Path) -> None:
    """`whiz heal -n 5` on the seeded `mean` bug (`bench.seeded_bugs.MEAN`: the task names the
    function only; pytest decides, its plugins' warnings and all), against the one shared server.
    A pass must fix the code, not the tests."""
    seen = []
    for seed in MEAN_SEEDS:
        root = tmp_path / f"seed-{seed}"
        root.mkdir()
        MEAN.write(root)
        options = SessionOptions(root, fast=FastSettings(base_url=real_server.root), home=tmp_path / "home")
        out = io.StringIO()
        code = heal_task(
            MEAN.task,
            MEAN.test_cmd,
            options,
            HealSettings(n=5, seed=seed, localize=True),
            Output(json_mode=True, out=out, err=io.StringIO()),
        )
        events = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
        statuses = [
            e["item"]["status"]
            for e in events
            if e["type"] == "item.completed" and e["item"]["type"] == "heal_candidate"
        ]
        seen.append((seed, code, statuses))
        if code == 0:
            assert (root / "test_stats.py").read_text() == MEAN.files["test_stats.py"]
            ran = subprocess.run(MEAN.test_cmd, shell=True, cwd=root, capture_output=True)
            assert ran.returncode == 0
            return
    pytest.fail(f"no seed healed the bug: {seen}")


FIZZBUZZ_TASK = (
    "Write fizzbuzz.py: a program that prints the numbers from 1 to 30, one per line, but Fizz for "
    "multiples of 3, Buzz for multiples of 5 and FizzBuzz for multiples of both."
)


def test_exec_auto_with_a_check_writes_a_program_that_runs(real_server, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "WHIZ_HOME": str(tmp_path / "home")}
    # Deep is the same 0.5B here (as in test_modes_real.py): `make test` pulls only the default model.
    # Auto mode heals (HEAL_N_DEFAULT candidates), the check deciding. Tried with four seeds (1234
    # to 1249 in steps of 5, 2026-11-25, AVX-512): a candidate passed in the first round of each,
    # and every winner printed FizzBuzz right, 1 to 30.
    done = subprocess.run(
        [sys.executable, "-m", "whiz", "exec", "--json", "--mode", "auto", "--check", "python3 fizzbuzz.py",
         "--base-url", real_server.root, "--deep-base-url", real_server.root, FIZZBUZZ_TASK],
        cwd=repo, env=env, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["type"] == "turn.completed"
    changes = [
        e["item"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == "file_change"
    ]
    assert {"path": "fizzbuzz.py", "kind": "add"} in [c for item in changes for c in item["changes"]]
    ran = subprocess.run(["python3", "fizzbuzz.py"], cwd=repo, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr
    assert "FizzBuzz" in ran.stdout.split()
