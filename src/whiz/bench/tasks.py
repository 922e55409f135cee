"""`whiz bench tasks`: the agent, headless, on EditEval tasks.

Each task gets a fresh workspace holding the file to edit and the task's test script, and a
fresh connection (so a fresh conversation). The agent gets the instruction and the file name,
as a user would type them; whether it passed is decided afterwards by running the task's test
against the file as the agent left it. Reported per action format: the pass rate, the median
seconds per task, the share of the model's edits that were well-formed (parsed and applied), the
share of its replies that asked for actions, all well-formed ("acting replies": a reply that
only talks, or writes a call the format does not know, is not one), with native tools how many of
the calls the model began came out well-formed (read as a call, a known tool, its arguments fit),
and the decode speed from the server's own timings.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from whiz.agent.approvals import ApprovalMode
from whiz.agent.config import AgentConfig
from whiz.agent.loop import Agent
from whiz.agent.models.whiz_model import WhizModel
from whiz.agent.project.workspace import Workspace
from whiz.bench.edit_tasks import EditTask, editeval_tasks, in_context, run_check
from whiz.bench.report import run_reported, say
from whiz.modes.endpoints import FastSettings, ensure_server


@dataclass
class TaskRun:
    task_id: str
    actions: str
    passed: bool
    status: str
    seconds: float
    edit_attempts: int
    edits_applied: int
    acting_replies: int
    decode_tokens: int
    decode_ms: float
    model_calls: int
    message: str
    calls_started: int = 0
    calls_well_formed: int = 0


def workspace_for(task: EditTask, root: Path) -> None:
    """The file to edit, and a test file that checks it (`command_for_tests`). It reads as a test file
    would: it runs the file, then the task's test as code of its own, so a failure's traceback
    quotes the failing assertion. (It held the whole program as one escaped string once: the model
    read the test as `'...\\n    assert ...'`, and a failure said only "AssertionError".) Its
    `test_check` is what pytest runs; `python test_<file>` runs the check too."""
    (root / task.filename).write_text(task.code)
    source = f"Path(__file__).with_name({task.filename!r}).read_text()"
    name = task.filename
    if in_context(task):
        # Its lines are not the file's: named so that no traceback quotes the file's lines for them.
        source, name = f"{task.context!r}.replace('{{{{Code}}}}', {source})", f"{name} in its context"
    test = (task.test or "").rstrip()
    loader = (
        f"from pathlib import Path\n\nexec(compile({source}, {name!r}, 'exec'))\n\n\n{test}\n\n\n"
        "def test_check():\n    check()\n\n\nif __name__ == '__main__':\n    check()\n"
    )
    (root / f"test_{task.filename}").write_text(loader)


def command_for_tests(task: EditTask) -> str:
    """How the agent runs the task's tests: with pytest where this Python has it, as most projects'
    tests run, so that a failing assertion shows its values ("assert 3 == 5, where 3 =
    prime_fib(2)") where plain Python says only "AssertionError"; else the test file itself.
    (`-p no:asyncio`: pytest-asyncio, where installed, warns on every run of a project without its
    setting.)"""
    test_file = f"test_{task.filename}"
    if importlib.util.find_spec("pytest") is None:
        return f"{sys.executable} {test_file}"
    # Only its own test: a file under edit may define a `test_` function of its own (EditEval 37).
    pytest = f"{sys.executable} -m pytest -q --tb=short -p no:cacheprovider -p no:asyncio"
    return f"{pytest} {test_file}::test_check"


async def run_task(url: str, task: EditTask, actions: str, api_key: str | None, model: str | None) -> TaskRun:
    with tempfile.TemporaryDirectory(prefix="whiz-bench-tasks-") as tmp:
        root = Path(tmp)
        workspace_for(task, root)
        client = await WhizModel.open(url, api_key, model=model)
        config = AgentConfig(actions=actions, approval=ApprovalMode.AUTO_EDIT, max_steps=6)  # type: ignore[arg-type]
        agent = Agent(client, Workspace(root), config=config)
        started = time.perf_counter()
        try:
            result = await agent.run(f"In {task.filename}: {task.instruction}")
        finally:
            await client.close()
        seconds = time.perf_counter() - started
        final = (root / task.filename).read_text()
        passed = result.ok and final != task.code and run_check(task, final)
    s = result.stats
    return TaskRun(
        task.task_id, actions, passed, result.status, seconds, s.edit_attempts, s.edits_applied,
        s.acting_replies, s.decode_tokens, s.decode_ms, s.model_calls, result.message,
        s.calls_started, s.calls_well_formed,
    )  # fmt: skip


def summarize(runs: list[TaskRun]) -> dict[str, Any]:
    attempts = sum(r.edit_attempts for r in runs)
    decode_ms = sum(r.decode_ms for r in runs)
    return {
        "tasks": len(runs),
        "pass_rate": sum(r.passed for r in runs) / len(runs),
        "median_s": statistics.median(r.seconds for r in runs),
        "well_formed_edits": sum(r.edits_applied for r in runs) / attempts if attempts else None,
        "edit_attempts": attempts,
        "well_formed_actions": sum(r.acting_replies for r in runs) / max(1, sum(r.model_calls for r in runs)),
        "tokens_per_s": sum(r.decode_tokens for r in runs) / decode_ms * 1000 if decode_ms else None,
        "model_calls": sum(r.model_calls for r in runs),
        "calls_started": sum(r.calls_started for r in runs),
        "calls_well_formed": sum(r.calls_well_formed for r in runs),
    }


async def run_bench(
    target: str | None, tasks: list[EditTask], formats: list[str], api_key: str | None, model: str | None, say
) -> dict[str, Any]:
    # In this process when nothing answers: a benchmark measures a server of its own.
    fast = FastSettings(base_url=target, api_key=api_key, model=model, in_process=True)
    reached = await ensure_server(fast, say)
    url, server = reached.url, reached.server
    try:
        results: dict[str, Any] = {}
        for actions in formats:
            runs = []
            for i, task in enumerate(tasks):
                run = await run_task(url, task, actions, api_key, reached.model)
                runs.append(run)
                verdict = "pass" if run.passed else f"fail ({run.status}: {run.message[:60]})"
                say(f"[{actions} {i + 1}/{len(tasks)}] {task.task_id}: {verdict}, {run.seconds:.1f} s")
            results[actions] = {"summary": summarize(runs), "runs": [vars(r) for r in runs]}
        return {"bench": "tasks", "target": url, "in_process_server": server is not None, "results": results}
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)


def print_report(report: dict[str, Any]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title=f"whiz bench tasks — EditEval — {report['target']}")
    columns = (
        "actions",
        "tasks",
        "pass rate",
        "median s/task",
        "well-formed edits",
        "acting replies",
        "well-formed calls",
        "tokens/s",
    )
    for name in columns:
        table.add_column(name, justify="left" if name == "actions" else "right")
    for actions, result in report["results"].items():
        s = result["summary"]
        wf = (
            "n/a"
            if s["well_formed_edits"] is None
            else f"{s['well_formed_edits']:.0%} of {s['edit_attempts']}"
        )
        tps = "n/a" if s["tokens_per_s"] is None else f"{s['tokens_per_s']:.1f}"
        acting = f"{s['well_formed_actions']:.0%} of {s['model_calls']}"
        calls = f"{s['calls_well_formed']} of {s['calls_started']}" if actions == "tools" else "n/a"
        table.add_row(
            actions, str(s["tasks"]), f"{s['pass_rate']:.0%}", f"{s['median_s']:.1f}", wf, acting, calls, tps
        )
    console.print(table)
    print(json.dumps(report), flush=True)


def main(
    target: str | None = None,
    limit: int | None = 5,
    actions: str = "text",
    api_key: str | None = None,
    model: str | None = None,
    data: Path | None = None,
) -> int:
    """0 when it ran; 2 for bad options, missing data or no server."""

    formats = ["text", "tools"] if actions == "both" else [actions]
    if any(f not in ("text", "tools") for f in formats):
        say(f"whiz bench tasks: --actions must be text, tools or both, not {actions!r}")
        return 2
    tasks = editeval_tasks(data, limit, say, "tasks")
    if tasks is None:
        return 2
    return run_reported("tasks", run_bench(target, tasks, formats, api_key, model, say), print_report)
