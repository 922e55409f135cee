"""`whiz exec --mode`, `whiz heal` and `whiz swarm` as library functions: the CLI only parses flags.

Each run has the same frame: events go to one sink (JSON Lines, or plain text on stderr), a
`Router` over a `ModelPool` says which model answers, the safety policy looks at the request
first, and routing decisions (mode changes, policy) go to the session log as well as to the
user. Exit codes as `whiz exec`: 0 done, 1 failed, refused or cancelled, 2 could not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from whiz.agent.edits import EditError, apply_changes, unified_diff
from whiz.agent.events import EventSink, JsonLinesPrinter
from whiz.agent.headless import EXIT_DONE, EXIT_FAILED, EXIT_SETUP, HumanPrinter
from whiz.agent.healing import Healer, HealOutcome, HealSettings
from whiz.agent.mode_session import ModeSession, RunOptions, SessionLog, check_policy, refuse
from whiz.agent.modes import Label, ModelPool, Models, Router
from whiz.agent.notices import ItemEmitter, NoticePrinter, Tee
from whiz.agent.policy import Decision
from whiz.agent.prompt import mentioned_files, system_prompt, task_message
from whiz.agent.runner import AgentOptions, SetupError
from whiz.agent.sessions import SessionStore, TurnRecord, data_home
from whiz.agent.swarm import Swarm, SwarmError, SwarmOutcome, SwarmSettings
from whiz.agent.swarm_plan import PlanError, load_plan
from whiz.agent.tools import run_reported
from whiz.agent.undo import UndoStore
from whiz.agent.workspace import Workspace
from whiz.client import ClientError
from whiz.environments.local import CommandResult, truncate
from whiz.errors import WhizError


def printer(json_mode: bool, out: TextIO | None, err: TextIO | None) -> EventSink:
    """JSON Lines on stdout, or the agent's plain-text view plus lines for routing and healing."""
    if json_mode:
        return JsonLinesPrinter(out)
    return Tee(HumanPrinter(out, err), NoticePrinter(err))


def report_error(sink: EventSink, err: TextIO, message: str, json_mode: bool) -> None:
    """One line on stderr, and an `error` event for JSON readers (plain text has the line already)."""
    if json_mode:
        sink({"type": "error", "message": message})
    err.write(f"error: {message}\n")


def notices_to(err: TextIO) -> Callable[[str], None]:
    """Writes a routing notice (a model starting, a mode switch) as one `whiz:` line on `err`."""

    def notice(line: str) -> None:
        err.write(f"whiz: {line}\n")
        err.flush()

    return notice


def run_to_exit_code(
    main: Coroutine[Any, Any, bool],
    sink: EventSink,
    err: TextIO,
    json_mode: bool,
    *,
    setup_errors: tuple[type[WhizError], ...] = (SetupError,),
    failed_errors: tuple[type[WhizError], ...] = (),
) -> int:
    """Run a command to its exit code: done when `main` returns True (it has said why when not).

    An error in `setup_errors` means the run could not start, one in `failed_errors` that it
    failed midway; either is reported as one line (and an `error` event in JSON mode).
    """
    try:
        ok = asyncio.run(main)
    except setup_errors as exc:
        report_error(sink, err, exc.message, json_mode)
        return EXIT_SETUP
    except failed_errors as exc:
        report_error(sink, err, exc.message, json_mode)
        return EXIT_FAILED
    return EXIT_DONE if ok else EXIT_FAILED


@dataclass
class Frame:
    """What a heal or swarm run works in: the routed models, and its session in the session log."""

    home: Path
    emit: ItemEmitter
    pool: Models
    router: Router
    store: SessionStore
    thread_id: str
    policy: Decision
    """The safety policy's decision on the task."""

    def save(
        self, task: str, items: list[dict], turn_id: str, status: str, message: str, paths: list[str]
    ) -> None:
        """Record the turn in the session log."""
        self.store.save(self.thread_id, items, TurnRecord(turn_id, task, status, message, paths, time.time()))

    def refuse(self, task: str) -> str:
        """Report the policy's refusal and record it as the turn; returns the reason."""
        message = refuse(self.emit, self.policy)
        self.save(task, [], "turn_" + uuid.uuid4().hex[:12], "refused", message, [])
        return message


@contextlib.asynccontextmanager
async def open_frame(
    command: str,
    task: str,
    ws: Workspace,
    options: RunOptions,
    sink: EventSink,
    err: TextIO,
    pool: Models | None,
    *,
    first: Label | None = None,
) -> AsyncIterator[Frame]:
    """Reach the `first` model (default: the mode's), start the session, run the policy on `task`.

    Routing decisions go to the session log as well as to `sink`. The pool and the session
    store are closed on the way out.
    """
    home = options.home or data_home()
    chain = Tee(sink)
    emit = ItemEmitter(chain)
    pool = pool or ModelPool(options.fast, options.deep, notice=notices_to(err))
    mode = options.mode or "fast"
    router = Router(pool, mode, emit)
    store = SessionStore(home / "sessions.db")
    try:
        if isinstance(pool, ModelPool):
            await pool.endpoint(first or router.current)
        info = store.create(ws.root, title=task, settings={"command": command, "mode": mode})
        sink({"type": "thread.started", "thread_id": info.id})
        chain.sinks.append(SessionLog(store, info.id))
        decision = await check_policy(task, options, pool, router, emit)
        yield Frame(home, emit, pool, router, store, info.id, decision)
    finally:
        store.close()
        await pool.close()


# -- whiz exec --mode ------------------------------------------------------------------------------


def exec_in_mode(
    task: str,
    agent: AgentOptions,
    options: RunOptions,
    *,
    json_mode: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
    pool: Models | None = None,
) -> int:
    """`whiz exec` (and `whiz resume`) with modes, healing steps (`options.heal`) and the policy;
    returns the exit code."""
    err = err or sys.stderr
    sink = printer(json_mode, out, err)
    return run_to_exit_code(_exec(task, agent, options, sink, err, pool), sink, err, json_mode)


async def _exec(
    task: str,
    agent_options: AgentOptions,
    options: RunOptions,
    sink: EventSink,
    err: TextIO,
    pool: Models | None,
) -> bool:
    session = await ModeSession.open(agent_options, options, sink=sink, notice=notices_to(err), pool=pool)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, session.agent.cancel)
    try:
        result = await session.run(task)
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        await session.close()
    if not result.ok:
        err.write(f"error: {result.message}\n")
    return result.ok


# -- whiz heal -------------------------------------------------------------------------------------

MAX_FAILURE_CHARS = 4000


def heal_messages(ws: Workspace, task: str, test_cmd: str, baseline: CommandResult | None) -> list[dict]:
    """The conversation a heal starts from: the agent's instructions, the task with its files, and
    (when the tests fail now) their output, with the files it names attached too."""
    text, attached = task_message(ws, task)
    if baseline is not None and not baseline.ok:
        output = truncate(baseline.output, MAX_FAILURE_CHARS).rstrip()
        text += f"\n\nThe tests (`{test_cmd}`) fail now:\n```\n{output}\n```"
        more = [p for p in mentioned_files(ws, baseline.output) if p not in attached][:2]
        for path in more:
            try:
                body = ws.read_text(path)
            except WhizError:
                continue
            text += f"\n\n{path}:\n```\n{body}{'' if body.endswith(chr(10)) else chr(10)}```"
    instructions = system_prompt(ws, "text", test_cmd=test_cmd)
    return [{"role": "system", "content": instructions}, {"role": "user", "content": text}]


@dataclass
class HealResult:
    outcome: HealOutcome | None
    applied: list[str]
    message: str
    ok: bool


def heal_task(
    task: str,
    test_cmd: str,
    options: RunOptions,
    settings: HealSettings,
    *,
    json_mode: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
    pool: Models | None = None,
) -> int:
    """`whiz heal`: heal once, apply the winner (undoably), return the exit code."""
    err = err or sys.stderr
    sink = printer(json_mode, out, err)
    # A ClientError: the server went away or refused a request midway.
    main = _heal(task, test_cmd, options, settings, sink, err, pool)
    return run_to_exit_code(main, sink, err, json_mode, failed_errors=(ClientError,))


async def _heal(
    task: str,
    test_cmd: str,
    options: RunOptions,
    settings: HealSettings,
    sink: EventSink,
    err: TextIO,
    pool: Models | None,
) -> bool:
    ws = Workspace(options.workspace)
    async with open_frame("heal", task, ws, options, sink, err, pool) as frame:
        if frame.policy.action == "refuse":
            result = HealResult(None, [], frame.refuse(task), False)
        else:
            undo = UndoStore(frame.home / "undo" / frame.thread_id)
            result = await _heal_turn(task, test_cmd, ws, settings, frame.router, frame.emit, undo)
            best = result.outcome.best if result.outcome else None
            items = [{"type": "message", "role": "user", "content": task}]
            if best:
                items.append({"type": "message", "role": "assistant", "content": best.text})
            status = "completed" if result.ok else "failed"
            frame.save(task, items, uuid.uuid4().hex, status, result.message, result.applied)
    if not result.ok:
        err.write(f"error: {result.message}\n")
    return result.ok


async def _heal_turn(
    task: str,
    test_cmd: str,
    ws: Workspace,
    settings: HealSettings,
    router: Router,
    emit: ItemEmitter,
    undo: UndoStore,
) -> HealResult:
    turn_id = "turn_" + uuid.uuid4().hex[:12]
    started = time.perf_counter()
    emit.emit("turn.started", turn_id=turn_id)
    baseline = await run_reported(emit, ws.root, test_cmd, settings.test_timeout_s)  # what fails now
    healer = Healer(ws, test_cmd, settings, emit=emit)
    outcome = await healer.heal(router, heal_messages(ws, task, test_cmd, baseline))
    usage = {"output_tokens": sum(sum(r.generation.output_tokens) for r in outcome.rounds)}
    timings = {**outcome.summary(), "duration_ms": (time.perf_counter() - started) * 1000}
    best = outcome.best
    if best is None:
        message = f"no candidate passed `{test_cmd}` in {len(outcome.rounds)} round(s); nothing was changed"
        emit.emit("turn.failed", turn_id=turn_id, error={"message": message}, usage=usage, timings=timings)
        return HealResult(outcome, [], message, False)
    summary = [{"path": c.path, "kind": "add" if c.before is None else "update"} for c in best.changes]
    diff = "".join(unified_diff(c) for c in best.changes)
    try:
        undo.record(turn_id, best.changes)
        apply_changes(ws, best.changes)
    except (EditError, OSError) as exc:
        emit.single("file_change", changes=summary, diff=diff, status="failed")
        message = (
            f"the winning edit could not be applied: {getattr(exc, 'message', exc)}; nothing was changed"
        )
        emit.emit("turn.failed", turn_id=turn_id, error={"message": message}, usage=usage, timings=timings)
        return HealResult(outcome, [], message, False)
    emit.single("file_change", changes=summary, diff=diff, status="completed")
    paths = [c.path for c in best.changes]
    message = f"round {best.round}, candidate {best.index} passes `{test_cmd}`; applied to {', '.join(paths)}"
    emit.emit("turn.completed", turn_id=turn_id, usage=usage, timings=timings, message=message)
    return HealResult(outcome, paths, message, True)


# -- whiz swarm ------------------------------------------------------------------------------------


def swarm_task(
    task: str,
    options: RunOptions,
    settings: SwarmSettings,
    *,
    plan_file: Path | None = None,
    json_mode: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
    pool: Models | None = None,
) -> int:
    """`whiz swarm`: plan, work in parallel, merge, test; returns the exit code."""
    err = err or sys.stderr
    if json_mode:
        sink: EventSink = JsonLinesPrinter(out)
        progress = None
    else:
        from whiz.agent.show import SwarmProgress

        progress = SwarmProgress(err)
        sink = Tee(progress, NoticePrinter(err, show_candidates=False))
    try:
        main = _swarm(task, options, settings, plan_file, sink, err, pool)
        setup_errors = (SetupError, SwarmError, PlanError)  # a bad plan cannot start either
        return run_to_exit_code(
            main, sink, err, json_mode, setup_errors=setup_errors, failed_errors=(ClientError,)
        )
    finally:
        if progress is not None:
            progress.close()


async def _swarm(
    task: str,
    options: RunOptions,
    settings: SwarmSettings,
    plan_file: Path | None,
    sink: EventSink,
    err: TextIO,
    pool: Models | None,
) -> bool:
    ws = Workspace(options.workspace)
    plan = load_plan(plan_file, ws) if plan_file is not None else None
    async with open_frame("swarm", task, ws, options, sink, err, pool, first="fast") as frame:
        if frame.policy.action == "refuse":
            err.write(f"error: {frame.refuse(task)}\n")
            return False
        if frame.policy.action == "reroute:deep":
            frame.router.mode = "deep"  # the director and every worker use the deep model
        turn_id = "turn_" + uuid.uuid4().hex[:12]
        started = time.perf_counter()
        emit = frame.emit
        emit.emit("turn.started", turn_id=turn_id)
        undo = UndoStore(frame.home / "undo" / frame.thread_id)
        swarm = Swarm(ws, frame.router, emit, settings, undo=undo, turn_id=turn_id)
        try:
            outcome = await swarm.run(task, plan)
        except (SwarmError, PlanError) as exc:
            emit.emit("turn.failed", turn_id=turn_id, error={"message": exc.message}, usage={})
            raise
        summary = {**outcome.summary(), "duration_ms": (time.perf_counter() - started) * 1000}
        merged = sorted({p for m in outcome.merges if m.status == "merged" for p in m.paths})
        if outcome.ok:
            message = f"{len(outcome.runs)} micro-tasks done and merged"
            emit.emit("turn.completed", turn_id=turn_id, usage={}, timings=summary, message=message)
        else:
            message = _swarm_failure(outcome)
            emit.emit("turn.failed", turn_id=turn_id, error={"message": message}, usage={}, timings=summary)
            err.write(f"error: {message}\n")
        items = [{"type": "message", "role": "user", "content": task}]
        frame.save(task, items, turn_id, "completed" if outcome.ok else "failed", message, merged)
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
