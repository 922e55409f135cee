"""One way to run a turn: `with turn(emit) as t:` mints the id, emits `turn.started`, and always
ends with `turn.completed` or `turn.failed`, whatever happens inside. `Progress` is what the
running turn has done so far.

The body says how the turn ended (`t.completed(...)` or `t.failed(message, ...)`); one that raises
instead ends as failed with the error's message (cancelled, for a cancellation), and one that
says nothing ends as failed too, so a reader of the events never waits for an end that won't come.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from whiz.agent.events import Emitter


def new_turn_id() -> str:
    return "turn_" + uuid.uuid4().hex[:12]


class Turn:
    """A running turn: its id, and the one end it gets."""

    def __init__(self, emit: Emitter, turn_id: str | None = None):
        self.emit = emit
        self.id = turn_id or new_turn_id()
        self.ended: str | None = None
        """"completed" or "failed" once the end is emitted."""

    def completed(self, **fields: Any) -> None:
        """End the turn as done; `fields` (usage, timings, message) go into the event."""
        self._end("turn.completed", fields)

    def failed(self, message: str, **fields: Any) -> None:
        """End the turn as failed, saying why; `fields` (usage, timings) go into the event."""
        self._end("turn.failed", {"error": {"message": message}, **fields})

    def _end(self, kind: str, fields: dict[str, Any]) -> None:
        if self.ended is not None:
            raise RuntimeError(f"turn {self.id} has already ended ({self.ended})")
        self.ended = kind.removeprefix("turn.")
        fields.setdefault("usage", {})
        self.emit.emit(kind, turn_id=self.id, **fields)


@contextlib.contextmanager
def turn(emit: Emitter, turn_id: str | None = None) -> Iterator[Turn]:
    """Start a turn; it ends (once) with `turn.completed` or `turn.failed` however the block exits."""
    t = Turn(emit, turn_id)
    emit.emit("turn.started", turn_id=t.id)
    try:
        yield t
    except BaseException as exc:
        if t.ended is None:
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
                t.failed("cancelled by the user")
            else:
                t.failed(getattr(exc, "message", None) or str(exc) or type(exc).__name__)
        raise
    if t.ended is None:
        t.failed("the turn ended without a result")


@dataclass
class Progress:
    """What the running turn has done so far: the loop writes it, the retry policy reads it."""

    task: str = ""
    """The task as the user wrote it."""
    changed: list[str] = field(default_factory=list)
    """The files the turn's edits changed, in order (a file once per edit)."""
    tests_fail: bool = False
    """The tests failed the last time they ran this turn."""
    untested: bool = False
    """Files changed since the tests last ran: with a test command, they run before an answer in
    words can end the turn."""
    checked: bool = False
    """The edit checks found problems this turn (they look once a turn)."""
    wants_change: bool = False
    """The task asks for a change (`intent.py`) in a session that may make one."""

    def still_to_change(self) -> bool:
        """Whether code written back unchanged leaves the turn undone, not answered: the tests fail
        on that code, or the task asked for a change and none is made yet."""
        return self.tests_fail or (not self.changed and self.wants_change)

    def verdict(self, status: str, message: str, shown_test_cmd: str) -> tuple[str, str]:
        """How the turn ended, judged by what it did: one that ended done in words without the
        change its task asked for, or with its tests (`shown_test_cmd`) still failing, failed."""
        if status == "completed" and not self.changed and self.wants_change:
            return "failed", f"the task asked for a change, but none was made: {message[:300]}"
        if status == "completed" and self.tests_fail:  # it gave up on failing tests, in words
            return "failed", f"the tests (`{shown_test_cmd}`) still fail: {message[:300]}"
        return status, message
