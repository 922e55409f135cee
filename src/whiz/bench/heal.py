"""`whiz bench heal`: does healing pay? One fast attempt vs heal@5 vs the deep model.

The tasks are EditEval's (`--suite editeval`) or small repositories with a seeded bug
(`--suite seeded`, `seeded_bugs.py`). Each task gets a fresh workspace (for EditEval, the file to
edit and its test script, as in `whiz bench tasks`) and the same prompt in every variant: the
instruction, the file, and the test's output. A variant passes a task when the edit it ends with
makes the task's test pass. With `--seeds K` every variant runs every task K times, with seeds
1234, 1334, ... (`--first-seed` moves the start, to split a long run): the report gives the
pass rate per seed, and their mean and spread.

    fast@1    one greedy attempt of the fast model
    heal@N    `whiz heal -n N`: localize the bug, N rewrites of its function, each tested in its
              own copy as it finishes, the first to pass ending the round; when none passes, a
              plain round with the best failure's output (fast mode: no escalation, so the
              comparison is fair)
    heal@N-plain  the same without localization: two rounds of N plain candidates (`whiz heal
              --no-localize`); not in the default list
    heal@N-all  every candidate finishes and the smallest passing diff wins (`whiz heal --all`);
              not in the default list
    deep@1    one greedy attempt of the deep model

Also measured, on the same tasks and prompts: decoding N candidates in parallel (one request
with n=N, sharing the prompt's KV cache) against one after another, with the same seeds, so the
same work is timed both ways. The report is a table, then one JSON line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from whiz.agent.events import Collector
from whiz.agent.project.workspace import Workspace
from whiz.bench.edit_tasks import EditTask, editeval_tasks
from whiz.bench.report import listed, run_reported, say
from whiz.bench.seeded_bugs import SEEDED, BugCase
from whiz.bench.tasks import command_for_tests, workspace_for
from whiz.environments import SandboxOptions, environment_for
from whiz.modes.candidates import Draw, generate
from whiz.modes.endpoints import DeepSettings, FastSettings
from whiz.modes.healing import Healer, HealSettings, heal_messages
from whiz.modes.notices import ItemEmitter
from whiz.modes.pool import Label, ModelPool
from whiz.modes.router import ModeRouter

VARIANTS = ("fast", "heal", "heal-plain", "heal-all", "deep", "decode")
SUITES = ("editeval", "seeded")
FIRST_SEED = 1234
SEED_STEP = 100


@dataclass
class VariantRun:
    task_id: str
    variant: str
    passed: bool
    seconds: float
    candidates: int
    decode_ms: float
    seed: int | None = None
    duplicates: int = 0
    """Candidates not tested because an earlier one made the same change."""


class EditCase:
    """An EditEval task as a heal case: the file and its test script (`bench.tasks`)."""

    def __init__(self, task: EditTask):
        self.task_id = task.task_id
        self.task = f"In {task.filename}: {task.instruction}"
        self.test_cmd = command_for_tests(task)
        self._edit = task

    def write(self, root: Path) -> None:
        workspace_for(self._edit, root)


Case = EditCase | BugCase


@contextlib.asynccontextmanager
async def task_workspace(
    case: Case, timeout_s: float, sandbox: SandboxOptions | None = None
) -> AsyncIterator[tuple[Workspace, str, list[dict], str]]:
    """A fresh workspace for `case`: (workspace, its test command, the heal's first messages, with
    what the tests say now, and their output where they fail). The folder is removed on the way
    out."""
    with tempfile.TemporaryDirectory(prefix="whiz-bench-heal-") as tmp:
        root = Path(tmp)
        case.write(root)
        ws = Workspace(root)
        baseline = await environment_for(root, sandbox, timeout_s=timeout_s).run(case.test_cmd)
        failure = "" if baseline.ok else baseline.output
        yield ws, case.test_cmd, heal_messages(ws, case.task, case.test_cmd, baseline), failure


async def run_variant(
    router: ModeRouter, case: Case, variant: str, label: Label, settings: HealSettings
) -> VariantRun:
    """One variant on one task, in a fresh workspace; nothing is applied, the winner is enough."""
    router.current = label
    started = time.perf_counter()
    async with task_workspace(case, settings.test_timeout_s, settings.sandbox) as opened:
        ws, command, messages, failure = opened
        healer = Healer(ws, command, settings, emit=ItemEmitter(Collector()))
        outcome = await healer.heal(router, messages, case.task, failure=failure)
        seconds = time.perf_counter() - started
    decode_ms = sum(r.generation.wall_ms for r in outcome.rounds)
    repeats = sum(r.status == "duplicate" or r.same_as is not None for r in outcome.results)
    return VariantRun(
        case.task_id, variant, outcome.best is not None, seconds, len(outcome.results), decode_ms,
        settings.seed, repeats,
    )  # fmt: skip


async def time_decoding(router: ModeRouter, case: Case, n: int, temperature: float, max_tokens: int) -> dict:
    """The same N candidates decoded together and one after another (same seeds): wall times."""
    async with task_workspace(case, 30) as (_ws, _command, messages, _failure):
        pass
    source = await router.candidates("fast")
    draw = Draw(n, temperature, max_tokens, seed=7)
    parallel = await generate(source, messages, draw)
    sequential = await generate(source, messages, dataclasses.replace(draw, parallel=False))
    return {
        "task_id": case.task_id,
        "parallel_ms": parallel.wall_ms,
        "sequential_ms": sequential.wall_ms,
        "method": parallel.method,
        "parallel_tokens": sum(parallel.output_tokens),
        "sequential_tokens": sum(sequential.output_tokens),
        "same_texts": parallel.texts == sequential.texts,
    }


def summarize(runs: list[VariantRun]) -> dict[str, Any]:
    """Pass rate over all runs, and per seed: their mean and spread (population standard
    deviation, and the lowest and highest)."""
    by_seed: dict[Any, list[VariantRun]] = {}
    for run in runs:
        by_seed.setdefault(run.seed, []).append(run)
    rates = [sum(r.passed for r in group) / len(group) for group in by_seed.values()]
    return {
        "tasks": len({r.task_id for r in runs}),
        "runs": len(runs),
        "pass_rate": sum(r.passed for r in runs) / len(runs),
        "passed": sum(r.passed for r in runs),
        "seeds": len(by_seed),
        "rate_per_seed": rates,
        "rate_mean": statistics.fmean(rates),
        "rate_spread": statistics.pstdev(rates),
        "rate_min": min(rates),
        "rate_max": max(rates),
        "median_s": statistics.median(r.seconds for r in runs),
        "candidates": sum(r.candidates for r in runs),
        "duplicates": sum(r.duplicates for r in runs),
    }


async def run_bench(
    tasks: list[Case],
    variants: list[str],
    n: int,
    temperature: float,
    fast: FastSettings,
    deep: DeepSettings,
    say,
    seeds: int = 1,
    first_seed: int = FIRST_SEED,
) -> dict[str, Any]:
    pool = ModelPool(fast, deep, notice=say)
    router = ModeRouter(pool, "fast", ItemEmitter(Collector()))
    plans = {
        "fast": ("fast@1", "fast", HealSettings(n=1, temperature=0.0, rounds=1, seed=None)),
        "heal": (f"heal@{n}", "fast", HealSettings(n=n, temperature=temperature, rounds=2, localize=True)),
        "heal-plain": (f"heal@{n}-plain", "fast", HealSettings(n=n, temperature=temperature, rounds=2)),
        "heal-all": (
            f"heal@{n}-all",
            "fast",
            HealSettings(n=n, temperature=temperature, rounds=2, first_pass=False, localize=True),
        ),
        "deep": ("deep@1", "deep", HealSettings(n=1, temperature=0.0, rounds=1, seed=None)),
    }
    try:
        endpoint = await pool.endpoint("fast")
        report: dict[str, Any] = {
            "bench": "heal", "target": endpoint.base_url, "n": n, "seeds": seeds, "variants": {}
        }  # fmt: skip
        for variant in [v for v in variants if v in plans]:
            name, label, settings = plans[variant]
            runs = []
            for k in range(seeds):
                # A greedy variant (one attempt at temperature 0) is the same on every seed.
                seed = None if settings.seed is None else first_seed + SEED_STEP * k
                seeded = dataclasses.replace(settings, seed=seed)
                for i, task in enumerate(tasks):
                    run = await run_variant(router, task, name, label, seeded)
                    run.seed = k
                    runs.append(run)
                    say(f"[{name} seed {k + 1}/{seeds} {i + 1}/{len(tasks)}] {task.task_id}: "
                        f"{'pass' if run.passed else 'fail'}, {run.seconds:.1f} s")  # fmt: skip
            report["variants"][name] = {"summary": summarize(runs), "runs": [vars(r) for r in runs]}
        if "decode" in variants:
            timings = []
            for task in tasks:
                timing = await time_decoding(router, task, n, temperature, 512)
                timings.append(timing)
                say(f"[decode] {task.task_id}: parallel {timing['parallel_ms'] / 1000:.1f} s, "
                    f"sequential {timing['sequential_ms'] / 1000:.1f} s ({timing['method']})")  # fmt: skip
            par = sum(t["parallel_ms"] for t in timings)
            seq = sum(t["sequential_ms"] for t in timings)
            report["decode"] = {
                "n": n,
                "parallel_s": par / 1000,
                "sequential_s": seq / 1000,
                "speedup": seq / par if par else None,
                "methods": sorted({t["method"] for t in timings}),
                "runs": timings,
            }
        return report
    finally:
        await pool.close()


def print_report(report: dict[str, Any]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title=f"whiz bench heal — {report.get('suite', 'editeval')} — {report['target']}")
    columns = ("variant", "tasks", "seeds", "pass rate (mean ± sd, min-max)", "median s/task", "candidates")
    for name in columns:
        table.add_column(name, justify="left" if name == "variant" else "right")
    for name, result in report["variants"].items():
        s = result["summary"]
        rate = f"{s['rate_mean']:.0%} ± {s['rate_spread']:.0%} ({s['rate_min']:.0%}-{s['rate_max']:.0%})"
        table.add_row(
            name, str(s["tasks"]), str(s["seeds"]), rate, f"{s['median_s']:.1f}",
            f"{s['candidates']} ({s['duplicates']} repeats)",
        )  # fmt: skip
    if decode := report.get("decode"):
        speed = "n/a" if decode["speedup"] is None else f"{decode['speedup']:.2f}x"
        table.add_row(
            f"decode {decode['n']} candidates",
            str(len(decode["runs"])),
            "",
            "",
            f"parallel {decode['parallel_s']:.1f} s vs sequential {decode['sequential_s']:.1f} s",
            f"{speed} ({', '.join(decode['methods'])})",
        )
    console.print(table)
    print(json.dumps(report), flush=True)


def main(
    target: str | None = None,
    limit: int | None = 3,
    n: int = 5,
    temperature: float = 0.7,
    variants: str = "fast,heal,deep,decode",
    api_key: str | None = None,
    model: str | None = None,
    deep: DeepSettings | None = None,
    data: Path | None = None,
    seeds: int = 1,
    suite: str = "editeval",
    first_seed: int = FIRST_SEED,
) -> int:
    """0 when it ran; 2 for bad options, missing data or no server; 1 when a server failed midway."""

    chosen = listed(variants)
    if not chosen or any(v not in VARIANTS for v in chosen):
        say(f"whiz bench heal: --variants takes a comma-separated list of {', '.join(VARIANTS)}")
        return 2
    if not 1 <= n <= 16:
        say("whiz bench heal: -n must be between 1 and 16")
        return 2
    if not 1 <= seeds <= 100:
        say("whiz bench heal: --seeds must be between 1 and 100")
        return 2
    if suite not in SUITES:
        say(f"whiz bench heal: --suite takes one of {', '.join(SUITES)}")
        return 2
    tasks: list[Case]
    if suite == "seeded":
        tasks = list(SEEDED[:limit] if limit else SEEDED)
    else:
        edits = editeval_tasks(data, limit, say, "heal")
        if edits is None:
            return 2
        tasks = [EditCase(t) for t in edits]
    fast = FastSettings(base_url=target, api_key=api_key, model=model)

    def report(result: dict[str, Any]) -> None:
        result["suite"] = suite
        print_report(result)

    bench = run_bench(tasks, chosen, n, temperature, fast, deep or DeepSettings(), say, seeds, first_seed)
    return run_reported("heal", bench, report)
