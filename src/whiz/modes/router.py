"""Which model answers: the mode (`registry.py`: fast, deep, auto) and the model it points at now.

`ModeRouter` says which model answers now and switches between them as the mode says; every
switch is a `mode_change` item with its reason. `RoutedModel` is the `ModelClient` the agent
talks to: it asks whichever model the router points at (see `pool.py` for where each model is).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from whiz.agent.events import Emitter, Event
from whiz.agent.model import Finished, ModelClient, ModelEvent, ModelRequest
from whiz.errors import WhizError
from whiz.modes.candidates import CandidateSource
from whiz.modes.pool import Models
from whiz.modes.registry import Label, Mode

EDIT_FAILURES_TO_ESCALATE = 2


@dataclass
class ModeRouter:
    """The mode and the model that answers now; every switch is a `mode_change` item.

    Each turn starts with the mode's first model, unless the policy pinned the turn to deep.
    """

    pool: Models
    mode: Mode
    """A mode's name is read as that mode."""
    emit: Emitter
    current: Label = Label.FAST
    pinned: bool = False
    changes: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.mode = Mode.named(self.mode)
        self.current = self.mode.first

    def escalate(self, reason: str, trigger: str) -> bool:
        """Move to deep, saying why, where the mode escalates on `trigger` (`Mode.escalates`).
        False (and nothing emitted) in any other case."""
        if not self.mode.escalates(trigger) or self.current == Label.DEEP:
            return False
        self._switch(Label.DEEP, reason, trigger)
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
        """An `EventSink` hook: a new turn starts with the mode's own model again (after auto
        escalated, or the policy rerouted the previous request); a pin lasts one turn."""
        kind = event.get("type")
        back = self.mode.first == Label.FAST and self.current == Label.DEEP
        if kind == "turn.started" and not self.pinned and back:
            why = "a new task starts with the fast model"
            if not self.mode.does.triggers:  # it never escalates: deep was the policy's reroute
                why = f"back to {self.mode} mode's model (the reroute was for that request only)"
            self._switch(Label.FAST, why, "new_turn")
        elif kind in ("turn.completed", "turn.failed"):
            self.pinned = False

    async def candidates(self, label: Label | None = None) -> CandidateSource:
        """The candidate source of `label`, by default of the model that answers now."""
        return await self.pool.candidates(label or self.current)

    def _switch(self, to: Label, reason: str, trigger: str) -> None:
        item = self.emit.single(
            "mode_change", **{"from": self.current, "to": to}, reason=reason, trigger=trigger
        )
        self.changes.append(item)
        self.current = to


class RoutedModel:
    """The agent's `ModelClient`: each call goes to the model the router points at.

    It also watches the agent's events (`observe`, an `EventSink`): in auto mode, the second
    edit of a turn that fails to apply moves the rest of the turn to deep.
    """

    def __init__(self, router: ModeRouter, *, temperature: float = 0.0):
        self.router = router
        self.temperature = temperature
        self._clients: dict[Label, ModelClient] = {}
        self._opening: dict[Label, asyncio.Lock] = {}
        self._active: ModelClient | None = None
        self._failed_edits = 0

    def observe(self, event: Event) -> None:
        self.router.observe_turn(event)
        kind, item = event.get("type"), event.get("item") or {}
        if kind == "turn.started":
            self._failed_edits = 0
        elif kind == "item.completed" and item.get("type") == "error":
            self._failed_edits += 1
            if self._failed_edits >= EDIT_FAILURES_TO_ESCALATE:
                first = str(item.get("message", "")).splitlines()[0][:160] if item.get("message") else ""
                self.router.escalate(
                    f"the fast model's edit failed to apply {self._failed_edits} times ({first})",
                    "edit_failures",
                )

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
        try:
            client = await self._client(self.router.current)
        except WhizError as exc:  # the deep model would not start, say: the turn fails with why
            yield Finished("failed", error=exc.message)
            return
        self._active = client
        try:
            async for event in client.respond(request):
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
        # One client per label, even when the UI's /mode and a turn ask for it at the same time.
        async with self._opening.setdefault(label, asyncio.Lock()):
            if label not in self._clients:
                self._clients[label] = await self.router.pool.open_client(label, temperature=self.temperature)
        return self._clients[label]
