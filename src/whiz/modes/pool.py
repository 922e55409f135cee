"""The fast and deep models of a session: `ModelPool` holds their endpoints and starts or checks
each one the first time it is needed; `ScriptedPool` stands in for it in tests.

    fast   the default 0.5B: the server at --base-url, or one started in this process
    deep   the 1.5B with the 0.5B as its draft model, started on first use: in the background
           beside the fast model's server (it outlives the command and serves the next warm), or
           with --in-process in this process (a second in-process whiz server, since one engine
           serves one model); a 1.5B that is not installed is a `DeepMissing`, said at once and
           not downloaded unasked; or any
           OpenAI-compatible upstream given by --deep-base-url/--deep-model/--deep-api-key
           (vLLM, SGLang, llama.cpp's server, Ollama, a hosted API), spoken to over Chat
           Completions, which all of them have
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from whiz.agent.models.chat_model import ChatModel
from whiz.agent.models.seam import ModelClient
from whiz.agent.models.whiz_model import WhizModel
from whiz.client import ClientError, ConnectError, HttpClient
from whiz.errors import WhizError
from whiz.models.store import ModelStore, default_home
from whiz.modes.candidates import CandidateSource, ChatCandidates
from whiz.modes.endpoints import (
    DeepSettings,
    FastSettings,
    Reached,
    SetupError,
    ensure_server,
    probe_upstream,
)
from whiz.modes.registry import Label
from whiz.server.background import IDLE_EXIT_S, BackgroundServers


class DeepMissing(SetupError):
    """The deep model is a model of whiz's registry that is not installed."""


@dataclass
class Endpoint:
    """A server to ask, and how: Responses WebSocket mode (whiz) or Chat Completions (any)."""

    label: Label
    base_url: str
    model: str | None
    api_key: str | None
    api: Literal["responses", "chat"]
    description: str


def fast_endpoint(settings: FastSettings, reached: Reached) -> Endpoint:
    """The fast model's endpoint on the whiz server `ensure_server` found or started for it."""
    name = settings.model or "the server's model"
    description = f"{name}, {reached.where}"
    return Endpoint("fast", reached.url, reached.model, settings.api_key, "responses", description)


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
                self._endpoints[label] = await (self._fast() if label == Label.FAST else self._deep())
            return self._endpoints[label]

    def offers(self, label: Label) -> bool:
        """Whether `label` is at hand without being asked for: the fast model always; the deep one
        where --deep-base-url names it, or where the fast model is whiz's own (no --base-url), whose
        pairing is the local 1.5B. A fast model of the user's choosing (--base-url: a vLLM, say)
        is not second-guessed by a model smaller than it may be."""
        if label == Label.FAST:
            return True
        return bool(self.deep_settings.base_url) or self.fast_settings.base_url is None

    async def open_client(self, label: Label, *, temperature: float = 0.0) -> ModelClient:
        """A new model client (one conversation) for `label`; close it with `close_client`."""
        ep = await self.endpoint(label)
        if ep.api == "chat":
            chat = ChatModel(ep.base_url, ep.api_key, model=ep.model, temperature=temperature)
            with contextlib.suppress(ClientError):  # an upstream that does not say: no compaction
                chat.context_window = await chat.http.context_window(ep.model)
            return chat
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
        reached = await ensure_server(s, self.notice)
        if reached.server is not None:
            self._servers.append(reached.server)
        return fast_endpoint(s, reached)

    async def _deep(self) -> Endpoint:
        s = self.deep_settings
        if s.base_url:
            await probe_upstream(s.base_url, s.api_key)
            name = s.model or "the upstream's model"
            return Endpoint("deep", s.base_url, s.model, s.api_key, "chat", f"{name} at {s.base_url}")
        missing = await asyncio.to_thread(not_installed, s.local_model)
        if missing:
            raise DeepMissing(missing)
        draft = f" with {s.draft_model} drafting" if s.draft_model else ""
        if not self.fast_settings.in_process:
            return await self._deep_in_background(s, draft)
        from whiz.config import ServeSettings
        from whiz.server.inprocess import InProcessServer

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

    async def _deep_in_background(self, s: DeepSettings, draft: str) -> Endpoint:
        """The deep model's background server (`BackgroundServers`), started now if none runs."""
        servers = BackgroundServers(default_home())
        running = await asyncio.to_thread(servers.find, s.local_model)
        if running is None:
            self.notice(
                f"starting the deep model {s.local_model}{draft} in the background (it stays warm for "
                f"the next command and exits after {IDLE_EXIT_S // 60} idle minutes; `whiz serve stop` "
                "ends it)"
            )
            args = ["--kv-budget-mb", str(s.kv_budget_mb), "--slots", str(s.slots)]
            args += ["--draft-model", s.draft_model] if s.draft_model else []
            try:
                running = await asyncio.to_thread(servers.start, s.local_model, args=args)
            except WhizError as exc:
                raise SetupError(
                    f"could not start the deep model {s.local_model}: {exc.message} "
                    "(or point --deep-base-url at a server)"
                ) from None
        where = f"in the background at {running.url}"
        return Endpoint("deep", running.url, None, None, "responses", f"{s.local_model}{draft}, {where}")


def not_installed(model: str, home: Path | None = None) -> str | None:
    """Why `model` cannot be served here without a download (it is a model of whiz's registry
    whose file is not installed), or None (installed, or a path or reference whiz does not pull)."""
    store = ModelStore(home or default_home())
    if model not in store.registry or store.file_for(model).is_file():
        return None
    return f"{model} is not installed"


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

    @classmethod
    def of(cls, fast: ModelClient) -> ScriptedPool:
        """A pool whose fast model is `fast` (one conversation) and that has no deep model."""
        return cls(clients={"fast": lambda: fast})

    def offers(self, label: Label) -> bool:
        """Whether the pool was given a `label` model."""
        return label in self.clients

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
