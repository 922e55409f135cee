"""`whiz swarm`: a director's plan, micro-tasks worked in parallel copies, merged, tested."""

from __future__ import annotations

import time
from pathlib import Path

from whiz.agent.editing.undo import UndoStore
from whiz.agent.events import EventSink, JsonLinesPrinter
from whiz.agent.project.workspace import Workspace
from whiz.agent.turns import turn
from whiz.client import ClientError
from whiz.commands.common import Output, open_frame
from whiz.modes.endpoints import SetupError
from whiz.modes.notices import NoticePrinter, Tee
from whiz.modes.pool import Models
from whiz.modes.registry import Mode
from whiz.modes.session import SessionOptions
from whiz.modes.swarm import Swarm, SwarmError, SwarmOutcome, SwarmSettings
from whiz.modes.swarm_plan import PlanError, load_plan


def swarm_task(
    task: str,
    options: SessionOptions,
    settings: SwarmSettings,
    output: Output | None = None,
    *,
    plan_file: Path | None = None,
    pool: Models | None = None,
) -> int:
    """`whiz swarm`: plan, work in parallel, merge, test; returns the exit code."""
    output = output or Output()
    err = output.errors
    if output.json_mode:
        sink: EventSink = JsonLinesPrinter(output.out)
        progress = None
    else:
        from whiz.commands.progress import SwarmProgress

        progress = SwarmProgress(err)
        sink = Tee(progress, NoticePrinter(err, show_candidates=False))
    try:
        main = _swarm(task, options, settings, plan_file, sink, output, pool)
        setup_errors = (SetupError, SwarmError, PlanError)  # a bad plan cannot start either
        return output.run(main, sink, setup_errors=setup_errors, failed_errors=(ClientError,))
    finally:
        if progress is not None:
            progress.close()


async def _swarm(
    task: str,
    options: SessionOptions,
    settings: SwarmSettings,
    plan_file: Path | None,
    sink: EventSink,
    output: Output,
    pool: Models | None,
) -> bool:
    ws = Workspace(options.workspace, options.agent.secrets)
    plan = load_plan(plan_file, ws) if plan_file is not None else None
    err = output.errors
    async with open_frame("swarm", task, ws, options, sink, output, pool, first="fast") as frame:
        if frame.policy.action == "refuse":
            err.write(f"error: {frame.refuse(task)}\n")
            return False
        if frame.policy.action == "reroute:deep":
            frame.router.mode = Mode.DEEP  # the director and every worker use the deep model
        with turn(frame.emit) as t:
            started = time.perf_counter()
            undo = UndoStore(frame.home / "undo" / frame.thread_id)
            swarm = Swarm(ws, frame.router, frame.emit, settings, undo=undo, turn_id=t.id)
            outcome = await swarm.run(
                task, plan
            )  # a SwarmError or PlanError fails the turn, with its message
            summary = {**outcome.summary(), "duration_ms": (time.perf_counter() - started) * 1000}
            merged = sorted({p for m in outcome.merges if m.status == "merged" for p in m.paths})
            if outcome.ok:
                message = f"{len(outcome.runs)} micro-tasks done and merged"
                t.completed(timings=summary, message=message)
            else:
                message = _swarm_failure(outcome)
                t.failed(message, timings=summary)
                err.write(f"error: {message}\n")
        items = [{"type": "message", "role": "user", "content": task}]
        frame.save(task, items, t.id, "completed" if outcome.ok else "failed", message, merged)
        return outcome.ok


def _swarm_failure(outcome: SwarmOutcome) -> str:
    parts = []
    if failed := [r.task.id for r in outcome.runs if not r.passed]:
        parts.append(f"micro-task(s) {', '.join(failed)} failed")
    if outcome.conflicts:
        parts.append(f"conflicts in {', '.join(m.task_id for m in outcome.conflicts)} (not merged)")
    if outcome.final is not None and not outcome.final.ok:
        parts.append(f"the final tests failed (exit {outcome.final.exit_code})")
    return "; ".join(parts) or "the swarm did not finish"
