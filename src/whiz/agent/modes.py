"""Fast and deep models, and which one answers.

    fast   the default 0.5B: the server at --base-url, or one started in this process
    deep   the 1.5B with the 0.5B as its draft model, started in this process on first use (a
           second in-process whiz server, since one engine serves one model); or any
           OpenAI-compatible upstream given by --deep-base-url/--deep-model/--deep-api-key
           (vLLM, SGLang, llama.cpp's server, Ollama, a hosted API), spoken to over Chat
           Completions, which all of them have
    auto   fast first; deep when an edit fails to apply twice in a turn, or when healing finds no
           passing candidate

`ModelPool` holds the endpoints and starts or checks each one the first time it is needed.
`Router` says which model answers now and switches between them; every switch is a
`mode_change` item with its reason. `RoutedModel` is the `ModelClient` the agent talks to:
it asks whichever model the router points at.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from whiz.agent.candidates import CandidateSource, ChatCandidates
from whiz.agent.chat_model import ChatModel
from whiz.agent.events import Emitter, Event
from whiz.agent.model import Finished, ModelClient, ModelEvent, ModelRequest
from whiz.agent.runner import AgentOptions, SetupError, ensure_server, probe
from whiz.agent.whiz_model import WhizModel
from whiz.client import ConnectError, HttpClient
from whiz.errors import WhizError

Mode = Literal["fast", "deep", "auto"]
MODES: tuple[Mode, ...] = ("fast", "deep", "auto")
Label = Literal["fast", "deep"]

DEEP_LOCAL_MODEL = "qwen2.5-coder-1.5b"
DEEP_DRAFT_MODEL = "qwen2.5-coder-0.5b"
EDIT_FAILURES_TO_ESCALATE = 2


def parse_mode(value: str) -> Mode:
    """`value` as a mode; ValueError naming the choices otherwise."""
    if value not in MODES:
        raise ValueError(f"the mode must be fast, deep or auto, not {value!r}")
    return value  # type: ignore[return-value]


@dataclass
class DeepSettings:
    """Where the deep model is. With no `base_url`, whiz serves `local_model` itself."""

    base_url: str | None = None
    """Any OpenAI-compatible server; its Chat Completions are used."""
    model: str | None = None
    """The model id to ask the upstream for (vLLM and hosted APIs need one)."""
    api_key: str | None = None
    local_model: str = DEEP_LOCAL_MODEL
    draft_model: str | None = DEEP_DRAFT_MODEL
    """Drafts tokens for `local_model` (same tokenizer); output is unchanged, only faster."""
    kv_budget_mb: int = 1536
    slots: int = 8


@dataclass
class FastSettings:
    """Where the fast model is: as `whiz exec` finds it (a server at base_url, or in-process)."""

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None


@dataclass
class Endpoint:
    """A server to ask, and how: Responses WebSocket mode (whiz) or Chat Completions (any)."""

    label: Label
    base_url: str
    model: str | None
    api_key: str | None
    api: Literal["responses", "chat"]
    description: str


class ModelPool:
    """The fast and deep endpoints, each connected (or started in this process) on first use."""

    def __init__(
        self,
        fast: FastSettings | None = None,
        deep: DeepSettings | None = None,
        *,
        notice: Callable[[str], None] = lambda line: None,
        endpoints: dict[Label, Endpoint] | None = None,
    ):
        self.fast_settings = fast or FastSettings()
        self.deep_settings = deep or DeepSettings()
        self.notice = notice
        self._endpoints: dict[Label, Endpoint] = dict(endpoints or {})
        self._servers: list = []
        self._locks: dict[Label, asyncio.Lock] = {}
        self._sources: dict[Label, tuple[HttpClient, ChatCandidates]] = {}

    async def endpoint(self, label: Label) -> Endpoint:
        """The endpoint for `label`, ready to answer. Raises `SetupError` with a one-line reason."""
        lock = self._locks.setdefault(label, asyncio.Lock())
        async with lock:
            if label not in self._endpoints:
                self._endpoints[label] = await (self._fast() if label == "fast" else self._deep())
            return self._endpoints[label]

    async def open_client(self, label: Label, *, temperature: float = 0.0) -> ModelClient:
        """A new model client (one conversation) for `label`; close it with `close_client`."""
        ep = await self.endpoint(label)
        if ep.api == "chat":
            return ChatModel(ep.base_url, ep.api_key, model=ep.model, temperature=temperature)
        try:
            return await WhizModel.open(ep.base_url, ep.api_key, model=ep.model, temperature=temperature)
        except ConnectError as exc:
            raise SetupError(f"the {label} model at {ep.base_url}: {exc.message}") from None

    async def candidates(self, label: Label) -> CandidateSource:
        """The candidate source for `label`: its Chat Completions, with `n` (kept open till close)."""
        if label not in self._sources:
            ep = await self.endpoint(label)
            http = HttpClient(ep.base_url, ep.api_key)
            self._sources[label] = (http, ChatCandidates(http, ep.model))
        return self._sources[label][1]

    async def close(self) -> None:
        """Close the candidate clients and stop the servers this pool started."""
        for http, _source in self._sources.values():
            await http.close()
        self._sources.clear()
        for server in self._servers:
            await asyncio.to_thread(server.stop)
        self._servers.clear()

    async def _fast(self) -> Endpoint:
        s = self.fast_settings
        options = AgentOptions(Path.cwd(), base_url=s.base_url, api_key=s.api_key, model=s.model)
        url, server = await ensure_server(options, self.notice)
        if server is not None:
            self._servers.append(server)
        name = s.model or "the server's model"
        where = "in this process" if server else url
        return Endpoint("fast", url, None if server else s.model, s.api_key, "responses", f"{name}, {where}")

    async def _deep(self) -> Endpoint:
        s = self.deep_settings
        if s.base_url:
            await probe_upstream(s.base_url, s.api_key)
            name = s.model or "the upstream's model"
            return Endpoint("deep", s.base_url, s.model, s.api_key, "chat", f"{name} at {s.base_url}")
        from whiz.config import ServeSettings
        from whiz.server.inprocess import InProcessServer

        draft = f" with {s.draft_model} drafting" if s.draft_model else ""
        self.notice(f"starting the deep model {s.local_model}{draft} in this process")
        settings = ServeSettings(
            model=s.local_model,
            draft_model=s.draft_model,
            temperature=0,
            kv_budget_mb=s.kv_budget_mb,
            slots=s.slots,
        )
        server = InProcessServer(settings)
        try:
            url = await asyncio.to_thread(server.start, 180.0)
        except WhizError as exc:
            raise SetupError(
                f"could not start the deep model {s.local_model}: {exc.message} "
                "(or point --deep-base-url at a server)"
            ) from None
        self._servers.append(server)
        return Endpoint("deep", url, None, None, "responses", f"{s.local_model}{draft}, in this process")


async def probe_upstream(url: str, api_key: str | None) -> None:
    """Check that an OpenAI-compatible server answers; `SetupError` with the reason if not."""
    try:
        await probe(url, api_key)
    except ConnectError as exc:
        raise SetupError(f"no deep model answers at {url} ({exc.message})") from None


class Models(Protocol):
    """What the router needs from a pool of models: `ModelPool`, or `ScriptedPool` in tests."""

    async def open_client(self, label: Label, *, temperature: float = 0.0) -> ModelClient: ...

    async def candidates(self, label: Label) -> CandidateSource: ...

    async def close(self) -> None: ...


@dataclass
class ScriptedPool:
    """Models for tests: a factory of clients and a candidate source per label."""

    clients: dict[str, Callable[[], ModelClient]] = field(default_factory=dict)
    sources: dict[str, CandidateSource] = field(default_factory=dict)
    opened: list[str] = field(default_factory=list)

    async def open_client(self, label: Label, *, temperature: float = 0.0) -> ModelClient:
        if label not in self.clients:
            raise SetupError(f"no {label} model in this scripted pool")
        self.opened.append(label)
        return self.clients[label]()

    async def candidates(self, label: Label) -> CandidateSource:
        if label not in self.sources:
            raise SetupError(f"no {label} candidates in this scripted pool")
        return self.sources[label]

    async def close(self) -> None:
        return None


@dataclass
class Router:
    """The mode and the model that answers now; every switch is a `mode_change` item.

    In auto mode each turn starts fast, unless the policy pinned the turn to deep.
    """

    pool: Models
    mode: Mode
    emit: Emitter
    current: Label = "fast"
    pinned: bool = False
    changes: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.current = "deep" if self.mode == "deep" else "fast"

    def escalate(self, reason: str, trigger: str) -> bool:
        """Auto mode: move to deep, saying why. False (and nothing emitted) in any other case."""
        if self.mode != "auto" or self.current == "deep":
            return False
        self._switch("deep", reason, trigger)
        return True

    def pin_deep(self, reason: str, trigger: str = "policy") -> None:
        """Send the next turn to deep whatever the mode (a policy reroute)."""
        self.pinned = True
        if self.current != "deep":
            self._switch("deep", reason, trigger)

    def set_mode(self, mode: Mode, reason: str = "the user chose it") -> None:
        """Change the mode (the UI's /mode); a change of model is announced.

        During a turn the policy pinned to deep, the new mode's model takes over at the next turn:
        a reroute is not undone by a mode switch."""
        self.mode = mode
        wanted: Label = "deep" if mode == "deep" else "fast"
        if wanted != self.current and not self.pinned:
            self._switch(wanted, reason, "user")

    def observe_turn(self, event: Event) -> None:
        """An `EventSink` hook: a new turn starts with the mode's own model again (after auto
        escalated, or the policy rerouted the previous request); a pin lasts one turn."""
        kind = event.get("type")
        if kind == "turn.started" and not self.pinned and self.mode != "deep" and self.current == "deep":
            why = "a new task starts with the fast model"
            if self.mode == "fast":
                why = "back to fast mode's model (the reroute was for that request only)"
            self._switch("fast", why, "new_turn")
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

    def __init__(self, router: Router, *, temperature: float = 0.0):
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
