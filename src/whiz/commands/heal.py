"""`whiz heal`: N candidates tested in copies, the winner applied (undoably)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from whiz.agent.editing.edits import EditError, apply_changes, unified_diff
from whiz.agent.editing.undo import UndoStore
from whiz.agent.events import EventSink
from whiz.agent.project.workspace import Workspace
from whiz.agent.tools import run_reported
from whiz.agent.turns import turn
from whiz.client import ClientError
from whiz.commands.common import Output, open_frame
from whiz.modes.heal_results import HealOutcome
from whiz.modes.healing import Healer, HealModels, HealSettings, heal_messages
from whiz.modes.notices import ItemEmitter
from whiz.modes.pool import Models
from whiz.modes.session import SessionOptions


@dataclass
class HealResult:
    turn_id: str
    """The turn the heal was reported and stored as."""
    outcome: HealOutcome | None
    applied: list[str]
    message: str
    ok: bool


def heal_task(
    task: str,
    test_cmd: str,
    options: SessionOptions,
    settings: HealSettings,
    output: Output | None = None,
    *,
    pool: Models | None = None,
) -> int:
    """`whiz heal`: heal once, apply the winner (undoably), return the exit code."""
    output = output or Output()
    sink = output.sink()
    # A ClientError: the server went away or refused a request midway.
    return output.run(
        _heal(task, test_cmd, options, settings, sink, output, pool), sink, failed_errors=(ClientError,)
    )


async def _heal(
    task: str,
    test_cmd: str,
    options: SessionOptions,
    settings: HealSettings,
    sink: EventSink,
    output: Output,
    pool: Models | None,
) -> bool:
    ws = Workspace(options.workspace, options.agent.secrets)
    async with open_frame("heal", task, ws, options, sink, output, pool) as frame:
        if frame.policy.action == "refuse":
            result = HealResult("", None, [], frame.refuse(task), False)
        else:
            undo = UndoStore(frame.home / "undo" / frame.thread_id)
            result = await _heal_turn(task, test_cmd, ws, settings, frame.router, frame.emit, undo)
            best = result.outcome.best if result.outcome else None
            items = [{"type": "message", "role": "user", "content": task}]
            if best:
                items.append({"type": "message", "role": "assistant", "content": best.text})
            status = "completed" if result.ok else "failed"
            frame.save(task, items, result.turn_id, status, result.message, result.applied)
    if not result.ok:
        output.errors.write(f"error: {result.message}\n")
    return result.ok


async def _heal_turn(
    task: str,
    test_cmd: str,
    ws: Workspace,
    settings: HealSettings,
    models: HealModels,
    emit: ItemEmitter,
    undo: UndoStore,
) -> HealResult:
    with turn(emit) as t:
        started = time.perf_counter()
        # what fails now
        healer = Healer(ws, test_cmd, settings, emit=emit)
        baseline = await run_reported(emit, ws.root, test_cmd, settings.test_timeout_s, settings.sandbox)
        if not baseline.timed_out:
            healer.saw_tests(baseline.duration_ms / 1000)
        failure = "" if baseline.ok else baseline.output
        messages = heal_messages(ws, task, test_cmd, baseline)
        outcome = await healer.heal(models, messages, task, failure=failure)
        usage = {"output_tokens": sum(sum(r.generation.output_tokens) for r in outcome.rounds)}
        timings = {**outcome.summary(), "duration_ms": (time.perf_counter() - started) * 1000}
        best = outcome.best
        if best is None:
            message = (
                f"no candidate passed `{test_cmd}` in {len(outcome.rounds)} round(s)"
                + (", stopped at the heal's time budget" if outcome.out_of_time else "")
                + "; nothing was changed"
            )
            t.failed(message, usage=usage, timings=timings)
            return HealResult(t.id, outcome, [], message, False)
        summary = [{"path": c.path, "kind": "add" if c.before is None else "update"} for c in best.changes]
        diff = "".join(unified_diff(c) for c in best.changes)
        try:
            undo.record(t.id, best.changes, ws)
            apply_changes(ws, best.changes)
        except (EditError, OSError) as exc:
            emit.single("file_change", changes=summary, diff=diff, status="failed")
            message = (
                f"the winning edit could not be applied: {getattr(exc, 'message', exc)}; nothing was changed"
            )
            t.failed(message, usage=usage, timings=timings)
            return HealResult(t.id, outcome, [], message, False)
        emit.single("file_change", changes=summary, diff=diff, status="completed")
        paths = [c.path for c in best.changes]
        message = (
            f"round {best.round}, candidate {best.index} passes `{test_cmd}`; applied to {', '.join(paths)}"
        )
        t.completed(usage=usage, timings=timings, message=message)
        return HealResult(t.id, outcome, paths, message, True)
