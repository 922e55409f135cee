"""`whiz bench heal`: does healing pay? One fast attempt vs heal@5 vs the deep model, on EditEval.

Each task gets a fresh workspace (the file to edit and its test script, as in `whiz bench tasks`)
and the same prompt in every variant: the instruction, the file, and the test's output. A
variant passes a task when the edit it ends with makes the task's test pass.

    fast@1    one greedy attempt of the fast model
    heal@N    N candidates at temperature T, each tested in its own copy as it finishes; the
              first to pass ends the round (the default of `whiz heal`); when none passes, a
              second round with the best failure's output (fast mode: no escalation, so the
              comparison is fair)
    heal@N-all  the same, but every candidate finishes and the smallest passing diff wins
              (`whiz heal --all`); not in the default list
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
from whiz.agent.workspace import Workspace
from whiz.bench.edit_tasks import EditTask, editeval_tasks
from whiz.bench.report import listed, run_reported, say
from whiz.bench.tasks import command_for_tests, workspace_for
from whiz.environments import SandboxOptions, environment_for
from whiz.modes.candidates import Draw, generate
from whiz.modes.endpoints import DeepSettings, FastSettings
from whiz.modes.healing import Healer, HealSettings, heal_messages
from whiz.modes.notices import ItemEmitter
from whiz.modes.pool import Label, ModelPool
from whiz.modes.router import ModeRouter

VARIANTS = ("fast", "heal", "heal-all", "deep", "decode")


@dataclass
class VariantRun:
    task_id: str
    variant: str
    passed: bool
    seconds: float
    candidates: int
    decode_ms: float


@contextlib.asynccontextmanager
async def task_workspace(
    task: EditTask, timeout_s: float, sandbox: SandboxOptions | None = None
) -> AsyncIterator[tuple[Workspace, str, list[dict]]]:
    """A fresh workspace for `task`: (workspace, its test command, the heal's first messages, with
    what the tests say now). The folder is removed on the way out."""
    with tempfile.TemporaryDirectory(prefix="whiz-bench-heal-") as tmp:
        root = Path(tmp)
        workspace_for(task, root)
        ws = Workspace(root)
        command = command_for_tests(task)
        baseline = await environment_for(root, sandbox, timeout_s=timeout_s).run(command)
        yield ws, command, heal_messages(ws, f"In {task.filename}: {task.instruction}", command, baseline)


async def run_variant(
    router: ModeRouter, task: EditTask, variant: str, label: Label, settings: HealSettings
) -> VariantRun:
    """One variant on one task, in a fresh workspace; nothing is applied, the winner is enough."""
    router.current = label
    started = time.perf_counter()
    async with task_workspace(task, settings.test_timeout_s, settings.sandbox) as (ws, command, messages):
        healer = Healer(ws, command, settings, emit=ItemEmitter(Collector()))
        outcome = await healer.heal(router, messages)
        seconds = time.perf_counter() - started
    decode_ms = sum(r.generation.wall_ms for r in outcome.rounds)
    return VariantRun(
        task.task_id, variant, outcome.best is not None, seconds, len(outcome.results), decode_ms
    )


async def time_decoding(
    router: ModeRouter, task: EditTask, n: int, temperature: float, max_tokens: int
) -> dict:
    """The same N candidates decoded together and one after another (same seeds): wall times."""
    async with task_workspace(task, 30) as (_ws, _command, messages):
        pass
    source = await router.candidates("fast")
    draw = Draw(n, temperature, max_tokens, seed=7)
    parallel = await generate(source, messages, draw)
    sequential = await generate(source, messages, dataclasses.replace(draw, parallel=False))
    return {
        "task_id": task.task_id,
        "parallel_ms": parallel.wall_ms,
        "sequential_ms": sequential.wall_ms,
        "method": parallel.method,
        "parallel_tokens": sum(parallel.output_tokens),
        "sequential_tokens": sum(sequential.output_tokens),
        "same_texts": parallel.texts == sequential.texts,
    }


def summarize(runs: list[VariantRun]) -> dict[str, Any]:
    return {
        "tasks": len(runs),
        "pass_rate": sum(r.passed for r in runs) / len(runs),
        "passed": sum(r.passed for r in runs),
        "median_s": statistics.median(r.seconds for r in runs),
        "candidates": sum(r.candidates for r in runs),
    }


async def run_bench(
    tasks: list[EditTask],
    variants: list[str],
    n: int,
    temperature: float,
    fast: FastSettings,
    deep: DeepSettings,
    say,
) -> dict[str, Any]:
    pool = ModelPool(fast, deep, notice=say)
    router = ModeRouter(pool, "fast", ItemEmitter(Collector()))
    plans = {
        "fast": ("fast@1", "fast", HealSettings(n=1, temperature=0.0, rounds=1, seed=None)),
        "heal": (f"heal@{n}", "fast", HealSettings(n=n, temperature=temperature, rounds=2)),
        "heal-all": (
            f"heal@{n}-all",
            "fast",
            HealSettings(n=n, temperature=temperature, rounds=2, first_pass=False),
        ),
        "deep": ("deep@1", "deep", HealSettings(n=1, temperature=0.0, rounds=1, seed=None)),
    }
    try:
        endpoint = await pool.endpoint("fast")
        report: dict[str, Any] = {"bench": "heal", "target": endpoint.base_url, "n": n, "variants": {}}
        for variant in [v for v in variants if v in plans]:
            name, label, settings = plans[variant]
            runs = []
            for i, task in enumerate(tasks):
                run = await run_variant(router, task, name, label, settings)
                runs.append(run)
                say(f"[{name} {i + 1}/{len(tasks)}] {task.task_id}: {'pass' if run.passed else 'fail'}, "
                    f"{run.seconds:.1f} s")  # fmt: skip
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
    table = Table(title=f"whiz bench heal — EditEval — {report['target']}")
    for name in ("variant", "tasks", "pass rate", "median s/task", "candidates"):
        table.add_column(name, justify="left" if name == "variant" else "right")
    for name, result in report["variants"].items():
        s = result["summary"]
        table.add_row(
            name, str(s["tasks"]), f"{s['pass_rate']:.0%}", f"{s['median_s']:.1f}", str(s["candidates"])
        )
    if decode := report.get("decode"):
        speed = "n/a" if decode["speedup"] is None else f"{decode['speedup']:.2f}x"
        table.add_row(
            f"decode {decode['n']} candidates",
            str(len(decode["runs"])),
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
) -> int:
    """0 when it ran; 2 for bad options, missing data or no server; 1 when a server failed midway."""

    chosen = listed(variants)
    if not chosen or any(v not in VARIANTS for v in chosen):
        say(f"whiz bench heal: --variants takes a comma-separated list of {', '.join(VARIANTS)}")
        return 2
    if not 1 <= n <= 16:
        say("whiz bench heal: -n must be between 1 and 16")
        return 2
    tasks = editeval_tasks(data, limit, say, "heal")
    if tasks is None:
        return 2
    fast = FastSettings(base_url=target, api_key=api_key, model=model)
    return run_reported(
        "heal", run_bench(tasks, chosen, n, temperature, fast, deep or DeepSettings(), say), print_report
    )
