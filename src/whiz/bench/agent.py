"""`whiz bench agent`: tasks done per minute. The agent headless, as `whiz exec` runs it, over a suite.

Suites: the EditEval dev set (the file to edit and its test, as in `whiz bench tasks`) and five
small whole-program tasks (`program_tasks.py`), each judged afterwards by running the program
headless. The agent gets the test command (EditEval) or a `--check` that runs the program
(programs), as a user would give them. Variants, in one run on the same tasks:

    fast     the fast model, one turn (the tests it is given decide when the turn is done)
    heal@5   the same, with healing steps of 5 candidates where the tests decide
    auto     auto mode: healing steps, and escalation to the deep model

Reported per variant: pass rate (by the judge), for programs how many pass their own check ("it
runs", what the agent was given), median and p90 seconds per task, the share of turns that ended
with no edit at all, runaways (turns stopped by their budget), and output tokens per task. The
report is a table, then one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from whiz.agent.approvals import ApprovalMode
from whiz.agent.config import AgentConfig
from whiz.agent.runs_check import with_check
from whiz.bench.edit_tasks import EditTask, editeval_tasks, run_check
from whiz.bench.program_tasks import PROGRAM_TASKS, ProgramTask
from whiz.bench.report import listed, run_reported, say
from whiz.bench.tasks import command_for_tests, workspace_for
from whiz.environments import environment_for
from whiz.modes.endpoints import DeepSettings, FastSettings, ensure_server
from whiz.modes.pool import Label, ModelPool, Models
from whiz.modes.registry import Mode

JUDGE_TIMEOUT_S = 30.0


@dataclass
class Variant:
    name: str
    mode: Mode
    heal: int


VARIANTS = {
    "fast": Variant("fast", "fast", 0),
    "heal": Variant("heal@5", "fast", 5),
    "auto": Variant("auto", "auto", 5),
}


@dataclass
class Case:
    """One task of a suite: how its workspace starts, what the agent is told and given, and the judge."""

    task_id: str
    suite: str
    prompt: str
    test_cmd: str
    setup: Callable[[Path], None]
    judge: Callable[[Path], Awaitable[bool]]
    runs: Callable[[Path], Awaitable[bool]] | None = None
    """Programs: whether the agent's own check passes on the final workspace ("it runs", the
    issue's measure), beside the stricter judge's "it does what was asked"."""


def editeval_case(task: EditTask) -> Case:
    async def judge(root: Path) -> bool:
        final = (root / task.filename).read_text()
        return final != task.code and await asyncio.to_thread(run_check, task, final)

    return Case(
        task.task_id, "editeval", f"In {task.filename}: {task.instruction}",
        command_for_tests(task), lambda root: workspace_for(task, root), judge,
    )  # fmt: skip


def program_case(task: ProgramTask) -> Case:
    async def judge(root: Path) -> bool:
        if not (root / task.filename).is_file():
            return False
        (root / "_judge.py").write_text(task.judge)
        return await sandboxed_ok(root, f"{sys.executable} _judge.py")

    check = with_check(None, task.run) or ""
    return Case(
        task.task_id, "programs", task.prompt, check, lambda root: None, judge,
        lambda root: sandboxed_ok(root, check),
    )  # fmt: skip


async def sandboxed_ok(root: Path, command: str) -> bool:
    """Whether `command` exits 0 in `root`. Model-written code: run in the sandbox, as the agent's
    own commands run."""
    done = await environment_for(root, timeout_s=JUDGE_TIMEOUT_S).run(command)
    return done.ok


@dataclass
class CaseRun:
    task_id: str
    suite: str
    variant: str
    passed: bool
    status: str
    seconds: float
    no_edit: bool
    runaway: bool
    output_tokens: int
    message: str
    runs: bool | None = None


class SharedPool:
    """One pool for every task's session: a session closes its pool, and the models must stay warm."""

    def __init__(self, pool: Models):
        self.pool = pool

    async def open_client(self, label: Label, *, temperature: float = 0.0):
        return await self.pool.open_client(label, temperature=temperature)

    async def candidates(self, label: Label):
        return await self.pool.candidates(label)

    async def close(self) -> None:
        return None


async def run_case(case: Case, variant: Variant, pool: Models, keep: Path | None = None) -> CaseRun:
    """One task in a fresh workspace and a fresh session, then its judge. With `keep`, the workspace
    and the session's home (its transcript) are copied there afterwards, to see why a task failed."""
    from whiz.modes.session import AgentSession, SessionOptions

    with tempfile.TemporaryDirectory(prefix="whiz-bench-agent-") as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        case.setup(root)
        agent = AgentConfig(approval=ApprovalMode.AUTO_EDIT, test_cmd=case.test_cmd)
        options = SessionOptions(
            root, agent=agent, mode=variant.mode, heal=variant.heal, home=Path(tmp) / "home"
        )
        started = time.perf_counter()
        timeline: list[dict[str, Any]] = []

        def record(event: dict[str, Any]) -> None:
            # When each step began and ended, for --keep: where a slow task's seconds went.
            if keep is not None and event.get("type") != "item.updated":
                timeline.append({"s": round(time.perf_counter() - started, 2)} | brief(event))

        session = await AgentSession.open(options, pool=SharedPool(pool), sink=record)
        try:
            result = await session.run(case.prompt)
        finally:
            await session.close()
        seconds = time.perf_counter() - started
        passed = await case.judge(root)
        ran = await case.runs(root) if case.runs is not None else None
        if keep is not None:
            dest = keep / variant.name.replace("@", "") / case.task_id.replace("/", "_")
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(tmp, dest, symlinks=True, ignore_dangling_symlinks=True)
            (dest / "timeline.jsonl").write_text("".join(json.dumps(t) + "\n" for t in timeline))
    return CaseRun(
        case.task_id, case.suite, variant.name, passed, result.status, seconds, not result.changed,
        result.message.startswith("stopped: the turn"), result.stats.output_tokens, result.message,
        ran,
    )  # fmt: skip


def brief(event: dict[str, Any]) -> dict[str, Any]:
    """An event without its long text: its type, and its item's type, status and small fields."""
    out: dict[str, Any] = {"event": event.get("type")}
    for key, value in (event.get("item") or {}).items():
        if key in ("id", "text", "aggregated_output", "changes", "diff") or isinstance(value, (dict, list)):
            continue
        # A candidate's reply (no edit, or malformed) is what shows why a rung found nothing.
        keep = 2000 if key == "reply" else 200
        out[key] = value if not isinstance(value, str) else value[:keep]
    return out


def summarize(runs: list[CaseRun]) -> dict[str, Any]:
    seconds = sorted(r.seconds for r in runs)
    p90 = statistics.quantiles(seconds, n=10, method="inclusive")[8] if len(seconds) > 1 else seconds[0]
    suites = sorted({r.suite for r in runs})
    return {
        "tasks": len(runs),
        "pass_rate": sum(r.passed for r in runs) / len(runs),
        "passed_by_suite": {
            s: f"{sum(r.passed for r in runs if r.suite == s)}/{sum(r.suite == s for r in runs)}"
            for s in suites
        },
        "runs_by_suite": {
            s: f"{sum(bool(r.runs) for r in runs if r.suite == s)}/{sum(r.suite == s for r in runs)}"
            for s in suites
            if any(r.runs is not None for r in runs if r.suite == s)
        },
        "median_s": statistics.median(seconds),
        "p90_s": p90,
        "no_edit_share": sum(r.no_edit for r in runs) / len(runs),
        "runaways": sum(r.runaway for r in runs),
        "output_tokens_per_task": sum(r.output_tokens for r in runs) / len(runs),
        "tasks_per_min": 60 * sum(r.passed for r in runs) / max(1e-9, sum(seconds)),
    }


async def run_suite(
    cases: list[Case], variants: list[Variant], pool: Models, say, keep: Path | None = None
) -> dict[str, Any]:
    """Every variant over every case (variant by variant); the summary and the runs of each."""
    results: dict[str, Any] = {}
    for variant in variants:
        runs = []
        for i, case in enumerate(cases):
            run = await run_case(case, variant, pool, keep)
            runs.append(run)
            verdict = "pass" if run.passed else f"fail ({run.status}: {run.message[:60]!r})"
            if run.runs is not None:
                verdict += ", its check passes" if run.runs else ", its check fails"
            say(f"[{variant.name} {i + 1}/{len(cases)}] {case.task_id}: {verdict}, {run.seconds:.1f} s")
        results[variant.name] = {"summary": summarize(runs), "runs": [vars(r) for r in runs]}
    return results


def print_report(report: dict[str, Any]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title=f"whiz bench agent — {report['target']}")
    columns = (
        "variant",
        "tasks",
        "pass rate",
        "by suite",
        "check passes",
        "median s",
        "p90 s",
        "no edit",
        "runaways",
        "tokens/task",
    )
    for name in columns:
        table.add_column(name, justify="left" if name in ("variant", "by suite") else "right")
    for name, result in report["results"].items():
        s = result["summary"]
        suites = ", ".join(f"{k} {v}" for k, v in s["passed_by_suite"].items())
        checks = ", ".join(f"{k} {v}" for k, v in s["runs_by_suite"].items()) or "-"
        table.add_row(
            name, str(s["tasks"]), f"{s['pass_rate']:.0%}", suites, checks, f"{s['median_s']:.1f}",
            f"{s['p90_s']:.1f}",
            f"{s['no_edit_share']:.0%}", str(s["runaways"]), f"{s['output_tokens_per_task']:.0f}",
        )  # fmt: skip
    console.print(table)
    print(json.dumps(report), flush=True)


async def run_bench(
    target: str | None,
    cases: list[Case],
    variants: list[Variant],
    fast: FastSettings,
    deep: DeepSettings,
    say,
    keep: Path | None = None,
) -> dict[str, Any]:
    # In this process when nothing answers: a benchmark measures a server of its own.
    fast.base_url, fast.in_process = target, True
    reached = await ensure_server(fast, say)
    fast.base_url, fast.model = reached.url, reached.model
    pool = ModelPool(fast, deep, notice=say)
    try:
        results = await run_suite(cases, variants, pool, say, keep)
        return {"bench": "agent", "target": reached.url, "results": results}
    finally:
        await pool.close()
        if reached.server is not None:
            await asyncio.to_thread(reached.server.stop)


def main(
    target: str | None = None,
    limit: int | None = 10,
    variants: str = "fast,heal,auto",
    suites: str = "editeval,programs",
    api_key: str | None = None,
    model: str | None = None,
    deep: DeepSettings | None = None,
    data: Path | None = None,
    keep: Path | None = None,
) -> int:
    """0 when it ran; 2 for bad options, missing data or no server."""

    chosen = listed(variants)
    wanted = set(listed(suites))
    if not chosen or any(v not in VARIANTS for v in chosen) or not wanted <= {"editeval", "programs"}:
        say("whiz bench agent: --variants takes fast, heal, auto; --suites takes editeval, programs")
        return 2
    cases: list[Case] = []
    if "editeval" in wanted:
        tasks = editeval_tasks(data, limit, say, "agent")
        if tasks is None:
            return 2
        cases += [editeval_case(t) for t in tasks]
    if "programs" in wanted:
        cases += [program_case(t) for t in PROGRAM_TASKS]
    fast = FastSettings(api_key=api_key, model=model)
    variants = [VARIANTS[v] for v in chosen]
    return run_reported(
        "agent", run_bench(target, cases, variants, fast, deep or DeepSettings(), say, keep), print_report
    )
