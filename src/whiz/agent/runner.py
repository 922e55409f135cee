"""An agent session with everything around it: the server connection (or an in-process server),
the session record in SQLite, and undo. `whiz exec`, `whiz resume`, the benchmark and the
interactive UI all start agents through `AgentSession.open`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from whiz.agent.approvals import ApprovalMode, Approvals, Approver
from whiz.agent.config import AgentConfig
from whiz.agent.events import EventSink
from whiz.agent.formats import ActionFormat
from whiz.agent.loop import Agent
from whiz.agent.model import ModelClient
from whiz.agent.sessions import SessionInfo, SessionStore, TurnRecord, data_home
from whiz.agent.stats import TurnResult
from whiz.agent.undo import UndoStore
from whiz.agent.whiz_model import WhizModel
from whiz.agent.workspace import Workspace
from whiz.client import ConnectError, HttpClient, ResponseError
from whiz.errors import WhizError

DEFAULT_BASE_URL = "http://127.0.0.1:8321"
DEFAULT_MODEL = "qwen2.5-coder-0.5b"


def default_base_url() -> str:
    """Where to look for a server when no URL is given: `$WHIZ_BASE_URL`, else port 8321 here."""
    return os.environ.get("WHIZ_BASE_URL") or DEFAULT_BASE_URL


class SetupError(WhizError):
    """The agent could not start: no server, a refused key, an unknown session. One line, for people."""


@dataclass
class AgentOptions:
    """How to start an agent session. `base_url=None` means the default URL (`$WHIZ_BASE_URL` or
    port 8321), or an in-process server when nothing answers there; an explicit URL that does
    not answer is an error."""

    workspace: Path
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    approval: ApprovalMode = ApprovalMode.AUTO_EDIT
    actions: ActionFormat | None = None
    """text or tools; None: text, or what the resumed session used."""
    test_cmd: str | None = None
    resume: str | None = None
    """A session id to continue, or "last" for the latest session in this workspace."""
    approver: Approver | None = None
    home: Path | None = None
    max_steps: int = 12


class AgentSession:
    """One agent, its stored session and its undo history. Use `open()`, then `run()`, `close()`."""

    def __init__(self, agent: Agent, store: SessionStore, info: SessionInfo, undo: UndoStore, cleanup):
        self.agent = agent
        self.store = store
        self.info = info
        self.undo_store = undo
        self._cleanup = cleanup

    @property
    def id(self) -> str:
        return self.info.id

    @classmethod
    async def open(
        cls,
        options: AgentOptions,
        *,
        sink: EventSink | None = None,
        notice: Callable[[str], None] = lambda line: None,
        model: ModelClient | None = None,
    ) -> AgentSession:
        """Connect (or start a server), then create or resume the session. Raises `SetupError`."""
        home = options.home or data_home()
        store = SessionStore(home / "sessions.db")
        try:
            info, items = _session(store, options)
        except SetupError:
            store.close()
            raise
        server = None
        if model is None:
            try:
                model, server = await connect(options, notice)
            except BaseException:
                store.close()
                raise
        ws = Workspace(options.workspace)
        undo = UndoStore(home / "undo" / info.id)
        config = AgentConfig(
            actions=options.actions or info.settings.get("actions") or "text",
            approval=options.approval,
            test_cmd=options.test_cmd,
            max_steps=options.max_steps,
        )
        approvals = Approvals(options.approval, options.approver, preapproved=[options.test_cmd or ""])
        agent = Agent(model, ws, config=config, sink=sink, approvals=approvals, undo=undo, items=items)
        if sink is not None:
            sink({"type": "thread.started", "thread_id": info.id})

        async def cleanup() -> None:
            if isinstance(model, WhizModel):
                await model.close()
            if server is not None:
                await asyncio.to_thread(server.stop)
            store.close()

        return cls(agent, store, info, undo, cleanup)

    async def run(self, task: str) -> TurnResult:
        """One turn; the conversation and the turn are stored when it ends, however it ends."""
        result = await self.agent.run(task)
        record = TurnRecord(
            result.turn_id,
            task,
            result.status,
            result.message,
            result.changed,
            time.time(),
            result.stats.usage(),
        )
        self.store.save(self.info.id, self.agent.items, record)
        return result

    def undo(self) -> list[str] | None:
        """Restore the files of the latest turn that changed any; None when there is nothing to undo."""
        undone = self.undo_store.undo(self.agent.ws)
        if undone is None:
            return None
        restored = undone.restored
        if restored:
            note = f"(The user undid your last changes to {', '.join(restored)}; those files are as before.)"
            self.agent.items.append({"type": "message", "role": "user", "content": note})
            self.store.save(self.info.id, self.agent.items)
        return restored

    async def close(self) -> None:
        await self._cleanup()


def _session(store: SessionStore, options: AgentOptions) -> tuple[SessionInfo, list[dict]]:
    info = find_session(store, options)
    if info is None:
        settings = {"actions": options.actions or "text", "approval": str(options.approval)}
        return store.create(options.workspace, settings=settings), []
    return info, store.items(info.id)


def find_session(store: SessionStore, options: AgentOptions) -> SessionInfo | None:
    """The stored session `options.resume` names (None when it names none: a new session).
    Raises `SetupError` when there is no such session."""
    if options.resume is None:
        return None
    if options.resume == "last":
        info = store.latest(options.workspace)
        if info is None:
            raise SetupError(f"no session to resume in {Path(options.workspace).resolve()}")
    else:
        info = store.get(options.resume)
        if info is None:
            raise SetupError(f"no session {options.resume!r}; `whiz resume` lists them")
    return info


def resumed_settings(options: AgentOptions) -> dict[str, Any]:
    """The settings stored with the session `options.resume` names ({} for a new session), read
    before connecting: what the session ran with decides which model to connect. `SetupError`
    when there is no such session."""
    if options.resume is None:
        return {}
    store = SessionStore((options.home or data_home()) / "sessions.db")
    try:
        info = find_session(store, options)
    finally:
        store.close()
    return dict(info.settings) if info else {}


async def connect(options: AgentOptions, notice: Callable[[str], None]) -> tuple[WhizModel, object | None]:
    """A model client for the configured server, or for an in-process one if none answers."""
    url, server = await ensure_server(options, notice)
    try:
        model = await WhizModel.open(url, options.api_key, model=None if server else options.model)
    except ConnectError as exc:
        if server is not None:
            await asyncio.to_thread(server.stop)
        raise SetupError(exc.message) from None
    return model, server


async def ensure_server(options: AgentOptions, notice: Callable[[str], None]):
    """(base URL, in-process server or None): the configured server if it answers, else one
    started here when the URL was the default. Raises `SetupError` with a one-line reason."""
    url = options.base_url or default_base_url()
    try:
        await probe(url, options.api_key)
        return url, None
    except ConnectError as exc:
        if options.base_url is not None:
            raise SetupError(f"no whiz server answers at {url} ({_reason(exc)})") from None
    from whiz.config import ServeSettings
    from whiz.server.inprocess import InProcessServer

    name = options.model or DEFAULT_MODEL
    notice(f"no whiz server at {url}; starting {name} in this process")
    server = InProcessServer(ServeSettings(model=name, temperature=0))
    try:
        return await asyncio.to_thread(server.start), server
    except WhizError as exc:
        raise SetupError(f"could not start a server with {name}: {exc.message}") from None


async def probe(url: str, api_key: str | None) -> None:
    """Ask the server for its models: a missing server raises `ConnectError`, a bad key `SetupError`."""
    try:
        async with HttpClient(url, api_key, timeout_s=5.0) as http:
            await http.models()
    except ValueError as exc:  # not a URL
        raise SetupError(str(exc)) from None
    except ResponseError as exc:
        if exc.status in (401, 403):
            raise SetupError(f"the server at {url} refused the API key ({exc.message})") from None
        raise SetupError(f"the server at {url} answered with an error: {exc.message}") from None


def _reason(exc: ConnectError) -> str:
    text = exc.message
    return text.split(": ", 1)[1] if ": " in text else text
