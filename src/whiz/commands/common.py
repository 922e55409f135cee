"""What every command's run shares: where its events go, its exit code, and the frame a heal or a
swarm works in (the routed models and its record in the session log).

Exit codes: 0 the task was done, 1 it failed, was refused or cancelled, 2 it could not start (no
server, a refused key, bad options).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from whiz.agent.events import Event, EventSink, JsonLinesPrinter
from whiz.agent.project.workspace import Workspace
from whiz.agent.runs_check import shown
from whiz.agent.store.sessions import SessionStore, TurnRecord, data_home
from whiz.agent.turns import new_turn_id
from whiz.errors import WhizError
from whiz.modes.endpoints import SetupError
from whiz.modes.notices import ItemEmitter, NoticePrinter, Tee
from whiz.modes.policy import PolicyDecision
from whiz.modes.pool import Label, ModelPool, Models
from whiz.modes.registry import Mode
from whiz.modes.router import ModeRouter
from whiz.modes.session import SessionLog, SessionOptions, check_policy, check_sandbox, refuse, tidy_workspace

EXIT_DONE, EXIT_FAILED, EXIT_SETUP = 0, 1, 2


class HumanPrinter:
    """The plain-text view of the events: the model's words on stdout, everything else on stderr."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None):
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._line_open = False

    def __call__(self, event: Event) -> None:
        kind, item = event["type"], event.get("item") or {}
        if kind == "item.updated" and item.get("type") == "agent_message":
            self.out.write(event.get("delta", ""))
            self.out.flush()
            self._line_open = not event.get("delta", "").endswith("\n")
            return
        if kind == "item.completed" and item.get("type") == "agent_message" and self._line_open:
            self.out.write("\n")
            self._line_open = False
        if kind == "item.completed":
            self._item(item)
        elif kind == "turn.completed":
            t = event.get("timings") or {}
            tps = t.get("tokens_per_s")
            speed = f", {tps:g} tok/s" if tps else ""
            seconds = t.get("duration_ms", 0) / 1000
            if "candidates" in t:  # a heal: its work is candidates, not model calls
                work = f"{_plural(t['candidates'], 'candidate')} in {_plural(t.get('rounds', 1), 'round')}"
            else:
                work = f"{t.get('model_calls', 0)} model calls"
            self._say(f"done in {seconds:.1f} s, {work}{speed}")
        elif kind == "error":
            self._say(f"error: {event['message']}")

    def _item(self, item: dict) -> None:
        match item.get("type"):
            case "file_change":
                paths = ", ".join(c["path"] for c in item.get("changes", []))
                self._say(f"{item.get('status')}: edit {paths}")
                if item.get("status") == "completed":
                    self.err.write(item.get("diff", ""))
            case "command_execution":
                # As the model reads it: a found check or `--check` is what it runs, not its wrapper.
                self._say(f"$ {shown(item['command'])}  ({item.get('status')}, exit {item.get('exit_code')})")
            case "tool_call":
                args = " ".join(str(v) for v in item.get("arguments", {}).values() if v is not None)
                self._say(f"{item['tool']} {args}")
            case "error":
                self._say(f"retrying: {item['message'].splitlines()[0]}")
            case "user_message":
                self._say(f"steering: {item['text']}")

    def _say(self, line: str) -> None:
        self.err.write(f"whiz: {line}\n")
        self.err.flush()


@dataclass
class Output:
    """Where a command's events and messages go."""

    json_mode: bool = False
    """JSON Lines on stdout (shaped like `codex exec --json`) instead of the plain-text view."""
    out: TextIO | None = None
    """Default: this process's stdout."""
    err: TextIO | None = None
    """Lines for people (notices, errors); default: this process's stderr."""

    def __post_init__(self) -> None:
        self.err = self.err or sys.stderr

    @property
    def errors(self) -> TextIO:
        assert self.err is not None
        return self.err

    def sink(self) -> EventSink:
        """JSON Lines on stdout, or the agent's plain-text view plus lines for routing and healing."""
        if self.json_mode:
            return JsonLinesPrinter(self.out)
        return Tee(HumanPrinter(self.out, self.err), NoticePrinter(self.errors))

    def notice(self, line: str) -> None:
        """A routing notice (a model starting, a mode switch) as one `whiz:` line."""
        self.errors.write(f"whiz: {line}\n")
        self.errors.flush()

    def error(self, sink: EventSink, message: str) -> None:
        """One line on stderr, and an `error` event for JSON readers (plain text has the line already)."""
        if self.json_mode:
            sink({"type": "error", "message": message})
        self.errors.write(f"error: {message}\n")

    def run(
        self,
        main: Coroutine[Any, Any, bool],
        sink: EventSink,
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
            self.error(sink, exc.message)
            return EXIT_SETUP
        except failed_errors as exc:
            self.error(sink, exc.message)
            return EXIT_FAILED
        return EXIT_DONE if ok else EXIT_FAILED


@dataclass
class Frame:
    """What a heal or swarm run works in: the routed models, and its session in the session log."""

    home: Path
    emit: ItemEmitter
    pool: Models
    router: ModeRouter
    store: SessionStore
    thread_id: str
    policy: PolicyDecision
    """The safety policy's decision on the task."""

    def save(
        self, task: str, items: list[dict], turn_id: str, status: str, message: str, paths: list[str]
    ) -> None:
        """Record the turn in the session log."""
        self.store.save(self.thread_id, items, TurnRecord(turn_id, task, status, message, paths, time.time()))

    def refuse(self, task: str) -> str:
        """Report the policy's refusal and record it as the turn; returns the reason."""
        message = refuse(self.emit, self.policy)
        self.save(task, [], new_turn_id(), "refused", message, [])
        return message


@contextlib.asynccontextmanager
async def open_frame(
    command: str,
    task: str,
    ws: Workspace,
    options: SessionOptions,
    sink: EventSink,
    output: Output,
    pool: Models | None,
    *,
    first: Label | None = None,
) -> AsyncIterator[Frame]:
    """Reach the `first` model (default: the mode's), start the session, run the policy on `task`.

    Routing decisions go to the session log as well as to `sink`. The pool and the session
    store are closed on the way out.
    """
    check_sandbox(ws.root, options.agent.sandbox)
    tidy_workspace(ws.root, output.notice)
    home = options.home or data_home()
    chain = Tee(sink)
    emit = ItemEmitter(chain)
    pool = pool or ModelPool(options.fast, options.deep, notice=output.notice)
    mode = options.mode or Mode.FAST
    router = ModeRouter(pool, mode, emit)
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


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
