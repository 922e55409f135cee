"""Which model answers: the mode (`registry.py`: fast, deep, auto) and the model it points at now.

`ModeRouter` says which model answers now and switches between them as the mode says: at the
start of a turn by what the task asks (`Mode.first_for`), during it on an escalation trigger,
and back to the fast model for good where the deep one cannot be had and the mode falls back;
every switch is a `mode_change` item with its reason. `RoutedModel` is the `ModelClient` the agent
talks to: it asks whichever model the router points at (see `pool.py` for where each model is),
and watches the agent's events for the triggers (failed edits, a failed run of the tests).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from whiz.agent.events import Emitter, Event
from whiz.agent.models.seam import Finished, ModelClient, ModelEvent, ModelRequest
from whiz.agent.runs_check import shown
from whiz.errors import WhizError
from whiz.modes.candidates import CandidateSource
from whiz.modes.endpoints import DEEP_LOCAL_MODEL, SetupError
from whiz.modes.pool import Models
from whiz.modes.registry import Label, Mode

EDIT_FAILURES_TO_ESCALATE = 2


@dataclass
class ModeRouter:
    """The mode and the model that answers now; every switch is a `mode_change` item.

    Each turn starts with the model the mode picks for its task (`start`, `Mode.first_for`), unless
    the policy pinned the turn to deep.
    """

    pool: Models
    mode: Mode
    """A mode's name is read as that mode."""
    emit: Emitter
    current: Label = Label.FAST
    pinned: bool = False
    changes: list[dict] = field(default_factory=list)
    deep_unavailable: str | None = None
    """Why the deep model cannot be had, once a mode that falls back found out: from then on the
    fast model answers and nothing escalates."""
    _next: tuple[Label, str] | None = None

    def __post_init__(self) -> None:
        self.mode = Mode.named(self.mode)
        self.current = self.mode.first

    def start(self, task: str) -> None:
        """Before a turn on `task`: the model the mode starts it with (`Mode.first_for`), taken up
        when the turn starts. A task the mode would start deep starts with the mode's own model
        where the pool has no deep model at hand (`offers`)."""
        label, why = self.mode.first_for(task)
        by_task = label != self.mode.first  # deep mode's own model is not the task's choice
        if by_task and label == Label.DEEP and (self.deep_unavailable or not offers(self.pool, Label.DEEP)):
            label, why = self.mode.first, ""
        self._next = (label, why)

    def escalate(self, reason: str, trigger: str) -> bool:
        """Move to deep, saying why, where the mode escalates on `trigger` (`Mode.escalates`).
        False (and nothing emitted) in any other case."""
        if not self.mode.escalates(trigger) or self.current == Label.DEEP or self.deep_unavailable:
            return False
        self._switch(Label.DEEP, reason, trigger)
        return True

    def fall_back(self, error: str) -> bool:
        """The deep model cannot be had (`error` says why): in a mode that falls back, the fast model
        answers from now on, said once; True. False where the mode does not fall back."""
        if not self.mode.falls_back:
            return False
        if self.deep_unavailable is None:
            self.deep_unavailable = error
            reason = (
                f"the deep model cannot be had ({error}); the fast model answers instead. "
                f"`whiz models pull {DEEP_LOCAL_MODEL}` (or `make model-deep`) installs it"
            )
            self._switch(Label.FAST, reason, "deep_unavailable", force=True)
        return True

    def pin_deep(self, reason: str, trigger: str = "policy") -> None:
        """Send the next turn to deep whatever the mode (a policy reroute)."""
        self.pinned = True
        if self.current != Label.DEEP:
            self._switch(Label.DEEP, reason, trigger)

    def set_mode(self, mode: Mode, reason: str = "the user chose it") -> None:
        """Change the mode (the UI's /mode); a change of model is announced.

        During a turn the policy pinned to deep, the new mode's model takes over at the next turn:
        a reroute is not undone by a mode switch."""
        self.mode = Mode.named(mode)
        if self.mode.first != self.current and not self.pinned:
            self._switch(self.mode.first, reason, "user")

    def observe_turn(self, event: Event) -> None:
        """An `EventSink` hook: a new turn starts with the model `start` chose for its task, else the
        mode's own (after auto escalated, or the policy rerouted the previous request); a pin lasts
        one turn."""
        kind = event.get("type")
        if kind == "turn.started":
            chosen, self._next = self._next, None
            if not self.pinned:
                self._take_up(*(chosen or (self.mode.first, "")))
        elif kind in ("turn.completed", "turn.failed"):
            self.pinned = False

    def _take_up(self, to: Label, why: str) -> None:
        """A new turn starts with `to` (`why`: what the mode said about its task, or nothing)."""
        if to == Label.DEEP and self.deep_unavailable:
            to = Label.FAST
        if to == self.current:
            return
        if to == Label.DEEP:
            self._switch(to, why or f"{self.mode} mode starts with the deep model", "task")
            return
        why = why or "a new task starts with the fast model"
        if not self.mode.does.triggers:  # it never escalates: deep was the policy's reroute
            why = f"back to {self.mode} mode's model (the reroute was for that request only)"
        self._switch(to, why, "new_turn")

    async def candidates(self, label: Label | None = None) -> CandidateSource:
        """The candidate source of `label`, by default of the model that answers now; the fast
        model's where the deep one cannot be had and the mode falls back."""
        label = label or self.current
        if label == Label.DEEP and self.deep_unavailable and self.mode.falls_back:
            label = Label.FAST
        try:
            return await self.pool.candidates(label)
        except SetupError as exc:
            if label != Label.DEEP or not self.fall_back(exc.message):
                raise
        return await self.pool.candidates(Label.FAST)

    def _switch(self, to: Label, reason: str, trigger: str, *, force: bool = False) -> None:
        if to == self.current and not force:
            return
        item = self.emit.single(
            "mode_change", **{"from": self.current, "to": to}, reason=reason, trigger=trigger
        )
        self.changes.append(item)
        self.current = to


def call_timings(label: Label, began: float, opened: float, usage: dict) -> dict[str, str | float | int]:
    """What the client adds to a call's server timings (the `whiz` of its `agent_message`): which
    model answered, the call's wall time from the client's side (prefill and decode are parts of
    it; the rest is queueing and transport) and how long its model took to open (0 when it was
    open already), so that a reader can say where a turn's seconds went."""
    now = time.perf_counter()
    return {
        "model": str(label),
        "call_ms": round((now - opened) * 1000, 1),
        "open_ms": round((opened - began) * 1000, 1),
        "input_tokens": usage.get("input_tokens") or 0,
        "cached_tokens": (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0,
    }


def offers(pool: Models, label: Label) -> bool:
    """Whether `pool` has the `label` model at hand without being told where (a pool that does not
    say, say a test's, has every model it was given)."""
    says = getattr(pool, "offers", None)
    return True if says is None else bool(says(label))


class RoutedModel:
    """The agent's `ModelClient`: each call goes to the model the router points at.

    It also watches the agent's events (`observe`, an `EventSink`): in auto mode, a run of the
    test command (or check) that fails moves the rest of the turn to deep at once, and so does
    the second edit of a turn that fails to apply.
    """

    def __init__(self, router: ModeRouter, *, temperature: float = 0.0, test_cmd: str | None = None):
        self.router = router
        self.temperature = temperature
        self.test_cmd = test_cmd
        """The command whose failing run is a `tests_failed` trigger (None: no tests)."""
        self._clients: dict[Label, ModelClient] = {}
        self._opening: dict[Label, asyncio.Lock] = {}
        self._active: ModelClient | None = None
        self._failed_edits = 0

    def observe(self, event: Event) -> None:
        self.router.observe_turn(event)
        kind, item = event.get("type"), event.get("item") or {}
        if kind == "turn.started":
            self._failed_edits = 0
        elif kind == "item.completed" and self._tests_failed(item):
            self.router.escalate(self._why_tests(item), "tests_failed")
        elif kind == "item.completed" and item.get("type") == "error":
            self._failed_edits += 1
            if self._failed_edits >= EDIT_FAILURES_TO_ESCALATE:
                first = str(item.get("message", "")).splitlines()[0][:160] if item.get("message") else ""
                self.router.escalate(
                    f"the fast model's edit failed to apply {self._failed_edits} times ({first})",
                    "edit_failures",
                )

    def _tests_failed(self, item: dict) -> bool:
        test_cmd = (self.test_cmd or "").strip()
        ran = item.get("type") == "command_execution" and str(item.get("command", "")).strip() == test_cmd
        return bool(test_cmd) and ran and item.get("status") == "failed"

    def _why_tests(self, item: dict) -> str:
        """The reason a failed run gives: the command, its exit code and its last line of output."""
        lines = [line.strip() for line in str(item.get("aggregated_output") or "").splitlines()]
        last = next((line for line in reversed(lines) if line), "")
        code = item.get("exit_code")
        said = f"`{shown(self.test_cmd or '')}` failed" + (f" (exit {code})" if code is not None else "")
        return said + (f": {last[:160]}" if last else "")

    async def connect(self) -> None:
        """Open the current model's client now, so a missing server is a setup error, not a failed turn."""
        await self._client(self.router.current)

    async def client(self, label: Label | None = None) -> ModelClient:
        """The client that answers for `label` (by default the current model), opened if need be."""
        return await self._client(label or self.router.current)

    def opened(self) -> dict[Label, ModelClient]:
        """The clients opened so far, by label (a UI names the models from them)."""
        return dict(self._clients)

    async def respond(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        began = time.perf_counter()
        try:
            client = await self._client(self.router.current)
        except WhizError as exc:  # the deep model would not start, say: the turn fails with why
            yield Finished("failed", error=exc.message)
            return
        opened = time.perf_counter()
        self._active = client
        try:
            async for event in client.respond(request):
                if isinstance(event, Finished):
                    label = next((k for k, c in self._clients.items() if c is client), self.router.current)
                    event.timings = event.timings | call_timings(label, began, opened, event.usage)
                yield event
        finally:
            self._active = None

    async def cancel(self) -> None:
        if self._active is not None:
            await self._active.cancel()

    @property
    def context_window(self) -> int | None:
        """The context window of the model that answers now (None until its client is open)."""
        client = self._clients.get(self.router.current)
        return getattr(client, "context_window", None)

    async def close(self) -> None:
        for client in self._clients.values():
            close = getattr(client, "close", None)
            if close is not None:
                await close()
        self._clients.clear()

    async def _client(self, label: Label) -> ModelClient:
        if label == Label.DEEP and self.router.deep_unavailable and self.router.mode.falls_back:
            label = Label.FAST
        try:
            return await self._open(label)
        except SetupError as exc:
            # The deep model is not installed, say: where the mode falls back, the fast one answers.
            if label != Label.DEEP or not self.router.fall_back(exc.message):
                raise
        return await self._open(Label.FAST)

    async def _open(self, label: Label) -> ModelClient:
        # One client per label, even when the UI's /mode and a turn ask for it at the same time.
        async with self._opening.setdefault(label, asyncio.Lock()):
            if label not in self._clients:
                self._clients[label] = await self.router.pool.open_client(label, temperature=self.temperature)
        return self._clients[label]
