"""`whiz bench agent`: tasks done per minute. The agent headless, as `whiz exec` runs it, over a suite.

Suites: the EditEval dev set (the file to edit and its test, as in `whiz bench tasks`) and five
small whole-program tasks (`program_tasks.py`), each judged afterwards by running the program
headless. The agent gets the test command (EditEval) or a `--check` that runs the program
(programs), as a user would give them. Variants, in one run on the same tasks:

    fast     the fast model, one turn (the tests it is given decide when the turn is done)
    deep     the deep model, one turn (the 1.5B with the 0.5B drafting, or --deep-base-url's)
    heal@5   the fast model, with healing steps of 5 candidates where the tests decide
    auto     auto mode as `whiz exec --mode auto` runs it: healing steps of HEAL_N_DEFAULT
             candidates, the deep model first where it pays, and escalation

Every variant runs over `--seeds N` seeds (each seeds the sampled candidates of the healing
steps apart; greedy replies repeat token for token, so a variant without sampling varies only
where a time budget cuts a turn short). Reported per variant: passes per seed (mean, min and
max), passes per minute (mean and range), pass rate, for programs how many pass their own check
("it runs", what the agent was given), median and p90 seconds per task, the share of turns that
ended with no edit at all, runaways (turns stopped by their budget), and output tokens per task.
The report is a table, then one JSON line with every seed's figures and runs.
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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from whiz.agent.approvals import ApprovalMode
from whiz.agent.config import AgentConfig
from whiz.agent.runs_check import with_check
from whiz.bench.canitedit import canitedit_tasks
from whiz.bench.dir_tasks import DirTask, TaskDirError, judge_for, load_tasks, setup_for, tests_for
from whiz.bench.edit_tasks import EditTask, editeval_tasks, run_check
from whiz.bench.phases import PhaseClock, line, order, summed
from whiz.bench.program_tasks import PROGRAM_TASKS, ProgramTask
from whiz.bench.report import listed, run_reported, say
from whiz.bench.tasks import command_for_tests, workspace_for
from whiz.environments import environment_for
from whiz.modes.endpoints import DeepSettings, FastSettings, Reached, ensure_server
from whiz.modes.pool import Label, ModelPool, Models, fast_endpoint
from whiz.modes.registry import Mode
from whiz.modes.session import HEAL_N_DEFAULT, AgentSession, SessionOptions

JUDGE_TIMEOUT_S = 30.0
SUITES = ("editeval", "canitedit", "programs")


@dataclass(frozen=True)
class Variant:
    name: str
    mode: Mode
    heal: int | None
    """None: by the mode, as `whiz exec` decides it (healing only where there is a test command)."""
    with_tests: bool = False
    """Give a `--tasks` task its test command (`--with-tests`); the suites' tasks always have theirs."""


VARIANTS = {
    "fast": Variant("fast", Mode.FAST, 0),
    "deep": Variant("deep", Mode.DEEP, 0),
    "heal": Variant("heal@5", Mode.FAST, 5),
    "auto": Variant("auto", Mode.AUTO, HEAL_N_DEFAULT),
    "exec": Variant("exec", Mode.AUTO, None),
}

SEEDS_DEFAULT = 3
SEED_BASE = 1234
"""Seed i seeds the healing candidates with SEED_BASE + SEED_STEP * i (seed 0: the default heal's);
`--first-seed` moves the base, to run seeds beyond a first run's (3 more: SEED_BASE + 3 SEED_STEP)."""
SEED_STEP = 7919


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
    tested: Case | None = None
    """The same task with its test command given (`--tasks` with `--with-tests`)."""


def editeval_case(task: EditTask) -> Case:
    async def judge(root: Path) -> bool:
        final = (root / task.filename).read_text()
        return final != task.code and await asyncio.to_thread(run_check, task, final)

    return Case(
        task.task_id, task.suite, f"In {task.filename}: {task.instruction}",
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


def dir_case(task: DirTask) -> Case:
    """A `--tasks` task as plain `whiz exec` gets it (no test command), and as `tested`, with one."""
    judge = judge_for(task, sandboxed_ok)
    tested = Case(task.task_id, "tasks", task.task, tests_for(task), setup_for(task, True), judge)
    return Case(task.task_id, "tasks", task.task, "", setup_for(task, False), judge, tested=tested)


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
    seed: int = 0
    started_with: str = ""
    """The model the turn started with: fast or deep."""
    phases: dict[str, Any] = field(default_factory=dict)
    """Where its seconds went (`phases.Phases.as_dict()`)."""


class SharedPool:
    """One pool for every task's session: a session closes its pool, and the models must stay warm."""

    def __init__(self, pool: ModelPool):
        self.pool = pool

    def offers(self, label: Label) -> bool:
        return self.pool.offers(label)

    async def open_client(self, label: Label, *, temperature: float = 0.0):
        return await self.pool.open_client(label, temperature=temperature)

    async def candidates(self, label: Label):
        return await self.pool.candidates(label)

    async def close(self) -> None:
        return None


async def run_case(
    case: Case,
    variant: Variant,
    pool: Models,
    keep: Path | None = None,
    seed: int = 0,
    first_seed: int = SEED_BASE,
) -> CaseRun:
    """One task in a fresh workspace and a fresh session, then its judge. With `keep`, the workspace
    and the session's home (its transcript) are copied there afterwards, to see why a task failed.
    `seed` (0, 1, ...) seeds the session's sampled candidates apart from other seeds': with
    `first_seed + SEED_STEP * seed`."""
    if variant.with_tests and case.tested is not None:
        case = case.tested
    with tempfile.TemporaryDirectory(prefix="whiz-bench-agent-") as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        case.setup(root)
        agent = AgentConfig(approval=ApprovalMode.AUTO_EDIT, test_cmd=case.test_cmd or None)
        options = SessionOptions(
            root,
            agent=agent,
            mode=variant.mode,
            heal=variant.heal,
            home=Path(tmp) / "home",
            seed=first_seed + SEED_STEP * seed,
        )
        started = time.perf_counter()
        timeline: list[dict[str, Any]] = []
        clock = PhaseClock()

        def record(event: dict[str, Any]) -> None:
            at = time.perf_counter() - started
            clock.see(at, event)
            # When each step began and ended, for --keep: where a slow task's seconds went.
            if keep is not None and event.get("type") != "item.updated":
                timeline.append({"s": round(at, 2)} | brief(event))

        session = await AgentSession.open(options, pool=SharedPool(pool), sink=record)
        try:
            result = await session.run(case.prompt)
        finally:
            await session.close()
        seconds = time.perf_counter() - started
        phases = clock.phases(seconds).as_dict()
        passed = await case.judge(root)
        ran = await case.runs(root) if case.runs is not None else None
        if keep is not None:
            dest = keep / f"seed{seed}" / variant.name.replace("@", "") / case.task_id.replace("/", "_")
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(tmp, dest, symlinks=True, ignore_dangling_symlinks=True)
            (dest / "timeline.jsonl").write_text("".join(json.dumps(t) + "\n" for t in timeline))
    return CaseRun(
        case.task_id, case.suite, variant.name, passed, result.status, seconds, not result.changed,
        result.message.startswith("stopped: the turn"), result.stats.output_tokens, result.message,
        ran, seed, first_model(session), phases,
    )  # fmt: skip


def first_model(session: Any) -> str:
    """The model the turn started with (`fast` or `deep`), as its first `mode_change` or its mode says."""
    changes = session.router.changes
    if changes and changes[0].get("trigger") == "task":
        return str(changes[0]["to"])
    return str(session.router.mode.first) if not changes else str(changes[0]["from"])


def brief(event: dict[str, Any]) -> dict[str, Any]:
    """An event without its long text: its type, and its item's type, status and small fields."""
    out: dict[str, Any] = {"event": event.get("type")}
    for key, value in (event.get("item") or {}).items():
        if key == "whiz" and isinstance(value, dict):
            out[key] = value  # a model call's timings: small numbers, where its seconds went
            continue
        if key in ("id", "text", "aggregated_output", "changes") or isinstance(value, (dict, list)):
            continue
        # A candidate's reply (no edit, or malformed) is what shows why a rung found nothing, and
        # its diff what it wrote (a program that passed its check and not the judge, say).
        keep = 2000 if key in ("reply", "diff") else 200
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
        "phases": summed([r.phases for r in runs if r.phases]),
    }


async def run_suite(
    cases: list[Case],
    variants: list[Variant],
    pool: Models,
    say,
    keep: Path | None = None,
    seeds: int = 1,
    first_seed: int = SEED_BASE,
) -> dict[str, Any]:
    """Every variant over every case, seed by seed (variant by variant within a seed, so that a
    slow spell of a shared machine falls on every variant alike); per variant the summary over the
    seeds and each seed's summary and runs."""
    by_variant: dict[str, list[list[CaseRun]]] = {v.name: [] for v in variants}
    for seed in range(seeds):
        for variant in variants:
            runs = []
            for i, case in enumerate(cases):
                run = await run_case(case, variant, pool, keep, seed, first_seed)
                runs.append(run)
                verdict = "pass" if run.passed else f"fail ({run.status}: {run.message[:60]!r})"
                if run.runs is not None:
                    verdict += ", its check passes" if run.runs else ", its check fails"
                where = f"seed {seed} " if seeds > 1 else ""
                say(
                    f"[{where}{variant.name} {i + 1}/{len(cases)}] {case.task_id}: {verdict}, "
                    f"{run.seconds:.1f} s ({run.started_with} first)"
                )
                if run.phases:
                    say(f"    {line(run.phases)}")
            by_variant[variant.name].append(runs)
    return {name: over_seeds(per_seed) for name, per_seed in by_variant.items()}


def over_seeds(per_seed: list[list[CaseRun]]) -> dict[str, Any]:
    """A variant's figures over its seeds: passes per seed (mean, min, max, population stdev) and
    passes per minute (mean, min, max), the pooled summary of every run, and each seed's own."""
    seeds = [
        {"seed": runs[0].seed, "summary": summarize(runs), "runs": [vars(r) for r in runs]}
        for runs in per_seed
    ]
    passes = [sum(r.passed for r in runs) for runs in per_seed]
    rates = [s["summary"]["tasks_per_min"] for s in seeds]
    pooled = summarize([r for runs in per_seed for r in runs])
    pooled["tasks"] = len(per_seed[0])
    pooled["seeds"] = len(per_seed)
    pooled["passes"] = {
        "mean": statistics.fmean(passes),
        "min": min(passes),
        "max": max(passes),
        "stdev": statistics.pstdev(passes),
        "per_seed": passes,
    }
    pooled["passes_per_min"] = {"mean": statistics.fmean(rates), "min": min(rates), "max": max(rates)}
    return {"summary": pooled, "seeds": seeds}


def print_report(report: dict[str, Any]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title=f"whiz bench agent — {report['target']}")
    columns = (
        "variant",
        "tasks",
        "seeds",
        "passes (min-max)",
        "passes/min (min-max)",
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
        p, r = s["passes"], s["passes_per_min"]
        table.add_row(
            name, str(s["tasks"]), str(s["seeds"]), f"{p['mean']:.1f} ({p['min']}-{p['max']})",
            f"{r['mean']:.2f} ({r['min']:.2f}-{r['max']:.2f})", f"{s['pass_rate']:.0%}", suites, checks,
            f"{s['median_s']:.1f}",
            f"{s['p90_s']:.1f}",
            f"{s['no_edit_share']:.0%}", str(s["runaways"]), f"{s['output_tokens_per_task']:.0f}",
        )  # fmt: skip
    console.print(table)
    phase_table = phases_table(report["results"])
    if phase_table is not None:
        console.print(phase_table)
    print(json.dumps(report), flush=True)


def phases_table(results: dict[str, Any]) -> Table | None:
    """Where the time went, per variant: each phase's median seconds per task (its mean share of a
    task's time), and the mean prefill and decode tokens and seconds per task."""
    rows = {name: r["summary"].get("phases") or {} for name, r in results.items()}
    names = sorted({k for p in rows.values() for k, v in p.items() if isinstance(v, dict)}, key=order)
    if not names:
        return None
    table = Table(title="where the time went: median s per task (mean share)")
    for column in ("variant", *names, "prefill tok/s", "decode tok/s"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for variant, p in rows.items():
        cells = [f"{p[n]['median_s']:.1f} ({p[n]['share']:.0%})" if n in p else "-" for n in names]
        prefill = f"{p.get('prefill_tokens', 0):.0f} / {p.get('prefill_s', 0):.1f}"
        decode = f"{p.get('decode_tokens', 0):.0f} / {p.get('decode_s', 0):.1f}"
        table.add_row(variant, *cells, prefill, decode)
    return table


def bench_pool(fast: FastSettings, deep: DeepSettings, reached: Reached, say) -> ModelPool:
    """The pool every task's session shares, on the fast server `ensure_server` reached.

    The fast endpoint is handed to the pool as it is, and `fast.base_url` stays what the user
    gave: where that is None the fast model is whiz's own, so auto mode has its deep model at
    hand and starts a change of behaviour with it, as `whiz exec --mode auto` does. (Naming the
    bench's own server as the fast model's base URL made the pool read it as a server of the
    user's choosing, and every auto task started with the fast model.)"""
    endpoint = fast_endpoint(fast, reached)
    fast.model = reached.model
    return ModelPool(fast, deep, notice=say, endpoints={Label.FAST: endpoint})


async def run_bench(
    target: str | None,
    cases: list[Case],
    variants: list[Variant],
    fast: FastSettings,
    deep: DeepSettings,
    say,
    keep: Path | None = None,
    seeds: int = SEEDS_DEFAULT,
    first_seed: int = SEED_BASE,
) -> dict[str, Any]:
    # In this process when nothing answers: a benchmark measures a server of its own.
    fast.base_url, fast.in_process = target, True
    reached = await ensure_server(fast, say)
    pool = bench_pool(fast, deep, reached, say)
    try:
        results = await run_suite(cases, variants, pool, say, keep, seeds, first_seed)
        report = {"bench": "agent", "target": reached.url, "seeds": seeds, "first_seed": first_seed}
        return {**report, "results": results}
    finally:
        await pool.close()
        if reached.server is not None:
            await asyncio.to_thread(reached.server.stop)


def main(
    target: str | None = None,
    limit: int | None = 10,
    variants: str | None = None,
    suites: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    deep: DeepSettings | None = None,
    data: Path | None = None,
    keep: Path | None = None,
    seeds: int = SEEDS_DEFAULT,
    canitedit: Path | None = None,
    first_seed: int = SEED_BASE,
    tasks: Path | None = None,
    with_tests: bool = False,
) -> int:
    """0 when it ran; 2 for bad options, missing data or no server. `tasks`: a folder of tasks
    (`dir_tasks.py`), run as plain `whiz exec` runs them (variant `exec` unless `variants` says),
    and with `with_tests` also with their test command."""

    chosen = listed(variants or ("exec" if tasks is not None else "fast,heal,auto"))
    wanted = (
        set(listed(suites))
        if suites is not None
        else set()
        if tasks is not None
        else {"editeval", "programs"}
    )
    if (
        not chosen
        or any(v not in VARIANTS for v in chosen)
        or not wanted <= set(SUITES)
        or not (wanted or tasks)
    ):
        say(f"whiz bench agent: --variants takes {', '.join(VARIANTS)}; --suites takes {', '.join(SUITES)}")
        return 2
    if seeds < 1:
        say("whiz bench agent: --seeds takes 1 or more")
        return 2
    if with_tests and tasks is None:
        say("whiz bench agent: --with-tests gives a --tasks task its test command; it needs --tasks DIR")
        return 2
    cases: list[Case] = []
    if tasks is not None:
        try:
            cases += [dir_case(t) for t in load_tasks(tasks)]
        except TaskDirError as exc:
            say(f"whiz bench agent: {exc}")
            return 2
    if "editeval" in wanted:
        found = editeval_tasks(data, limit, say, "agent")
        if found is None:
            return 2
        cases += [editeval_case(t) for t in found]
    if "canitedit" in wanted:
        found = canitedit_tasks(canitedit, limit, say)
        if found is None:
            return 2
        cases += [editeval_case(t) for t in found]
    if "programs" in wanted:
        cases += [program_case(t) for t in PROGRAM_TASKS]
    fast = FastSettings(api_key=api_key, model=model)
    plain = [VARIANTS[v] for v in chosen]
    run = plain + [replace(v, name=f"{v.name}+tests", with_tests=True) for v in plain if with_tests]
    work = run_bench(target, cases, run, fast, deep or DeepSettings(), say, keep, seeds, first_seed)
    return run_reported("agent", work, print_report)
