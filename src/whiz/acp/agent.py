"""The ACP agent: protocol calls onto whiz's `AgentSession`, the agent `whiz code` runs.

Each ACP session is one stored whiz session (its id is the ACP session id, so `session/load` and
`whiz resume` find it). The agents run on their own thread (`runner.py`); this object lives on the
protocol's loop and hands each call over. A session's updates go through one queue in order, and
a prompt answers only after every update of its turn was sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from acp import PROTOCOL_VERSION, RequestError, update_agent_message_text, update_user_message_text
from acp.helpers import update_current_mode
from acp.schema import (
    AgentCapabilities,
    EmbeddedResourceContentBlock,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResourceContentBlock,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionMode,
    SessionModeState,
    SetSessionModeResponse,
    TextContentBlock,
    TextResourceContents,
)

from whiz import __version__
from whiz.acp.files import ClientFiles
from whiz.acp.mcp import editor_servers, merged
from whiz.acp.permissions import AcpApprover
from whiz.acp.runner import AgentRunner
from whiz.acp.updates import UpdateMapper
from whiz.agent.store.sessions import SessionStore, data_home
from whiz.errors import WhizError
from whiz.modes.endpoints import SetupError
from whiz.modes.pool import Label, ModelPool, Models
from whiz.modes.registry import Mode
from whiz.modes.session import AgentSession, SessionOptions

log = logging.getLogger("whiz.acp")

NOT_FOUND = -32002
"""ACP's error code for a session (or other resource) that does not exist."""


def error(code: int, message: str, **data: Any) -> RequestError:
    """A JSON-RPC error whose message says what went wrong in words."""
    return RequestError(code, message, data or None)


def invalid(message: str, **data: Any) -> RequestError:
    return error(-32602, message, **data)


class SharedPool:
    """The models every session of this process shares (one server, one warm cache); sessions
    closing leave it open, and the agent closes it when the editor goes."""

    def __init__(self, pool: Models):
        self.pool = pool

    async def open_client(self, label: Label, *, temperature: float = 0.0):
        return await self.pool.open_client(label, temperature=temperature)

    async def candidates(self, label: Label):
        return await self.pool.candidates(label)

    async def close(self) -> None:
        return None


@dataclass
class Live:
    """One open ACP session: the whiz session, and the queue of its updates to the client."""

    session: AgentSession
    outbox: asyncio.Queue
    mapper: UpdateMapper
    approver: AcpApprover
    files: ClientFiles | None
    sender: asyncio.Task | None = None
    running: bool = False
    cancelled: bool = False


def mode_state(current: Mode) -> SessionModeState:
    """whiz's modes as ACP session modes (`session/set_mode` switches them)."""
    modes = [SessionMode(id=str(mode), name=str(mode), description=mode.help()) for mode in Mode]
    return SessionModeState(current_mode_id=str(current), available_modes=modes)


class WhizAcpAgent:
    """The ACP agent over whiz sessions; `options` are the command line's (the workspace of each
    session is its `cwd`), `pool` the models (default: the fast and deep models `whiz code` uses)."""

    def __init__(self, options: SessionOptions, *, pool: Models | None = None):
        self.options = options
        self.runner = AgentRunner()
        self._pool_given = pool
        self._pool: SharedPool | None = None
        self.conn: Any = None
        self.fs_read = False
        self.fs_write = False
        self.sessions: dict[str, Live] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # -- the protocol ------------------------------------------------------------------------------

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        fs = getattr(client_capabilities, "fs", None)
        self.fs_read = bool(fs and fs.read_text_file)
        self.fs_write = bool(fs and fs.write_text_file)
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            agent_info=Implementation(name="whiz", title="whiz", version=__version__),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        raise invalid(f"whiz needs no authentication (no method {method_id!r})")

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        live = await self._open(cwd, resume=None, mcp_servers=mcp_servers)
        return NewSessionResponse(session_id=live.session.id, modes=mode_state(live.session.router.mode))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        live = self.sessions.get(session_id)
        if live is not None and live.running:
            raise error(-32600, f"session {session_id} is running a prompt; cancel it first")
        if live is None:
            live = await self._open(cwd, resume=session_id, mcp_servers=mcp_servers)
        turns = await self.runner.call(_turns(live.session))
        for task, message in turns:
            live.outbox.put_nowait(update_user_message_text(task))
            if message:
                live.outbox.put_nowait(update_agent_message_text(message))
        await live.outbox.join()
        return LoadSessionResponse(modes=mode_state(live.session.router.mode))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any):
        home = self.options.home or data_home()
        infos = await self.runner.call(_list(home, Path(cwd) if cwd else None))
        sessions = [
            SessionInfo(
                session_id=info.id,
                cwd=info.workspace,
                title=info.title or None,
                updated_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(info.updated_at)),
            )
            for info in infos
        ]
        return ListSessionsResponse(sessions=sessions)

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        live = self._live(session_id)
        try:
            mode = Mode.named(mode_id)
        except ValueError as exc:
            raise invalid(str(exc), modeId=mode_id) from None
        try:
            await self.runner.call(live.session.switch_mode(mode, "the user chose it in the editor"))
        except SetupError as exc:
            raise error(-32603, f"could not switch to {mode} mode: {exc.message}") from None
        live.outbox.put_nowait(update_current_mode(str(live.session.router.mode)))
        await live.outbox.join()
        return SetSessionModeResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        live = self._live(session_id)
        task = prompt_text(prompt, live.session.agent.ws.root)
        if live.running:
            raise error(
                -32600,
                f"session {session_id} is already running a prompt; wait for it or send session/cancel",
                sessionId=session_id,
            )
        live.cancelled = live.mapper.cancelled = False
        live.running = True
        try:
            outcome = await self.runner.call(live.session.run(task))
        except WhizError as exc:
            raise error(-32603, f"the turn failed: {exc.message}") from None
        finally:
            await live.outbox.join()
            live.running = False
        if live.cancelled or outcome.status == "cancelled":
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        live = self.sessions.get(session_id)
        if live is None or not live.running:
            return  # a notification has no answer; nothing runs there to stop
        live.cancelled = live.mapper.cancelled = True
        self.runner.soon(live.session.cancel)

    # -- sessions ----------------------------------------------------------------------------------

    def _live(self, session_id: str) -> Live:
        live = self.sessions.get(session_id)
        if live is None:
            raise error(
                NOT_FOUND,
                f"no session {session_id!r} in this connection: create one with session/new "
                "or load a stored one with session/load",
                sessionId=session_id,
            )
        return live

    async def _open(self, cwd: str, *, resume: str | None, mcp_servers: Any = None) -> Live:
        workspace = Path(cwd)
        if not workspace.is_absolute() or not workspace.is_dir():
            raise invalid(f"cwd must be the absolute path of a folder, not {cwd!r}", cwd=cwd)
        try:
            servers = merged(self.options.mcp, editor_servers(mcp_servers))
        except ValueError as exc:
            raise invalid(str(exc)) from None
        options = dataclasses.replace(self.options, workspace=workspace, resume=resume, mcp=servers)
        loop = asyncio.get_running_loop()
        outbox: asyncio.Queue = asyncio.Queue()
        holder: dict[str, UpdateMapper] = {}

        def sink(event: dict[str, Any]) -> None:  # on the agent's thread
            mapper = holder.get("mapper")
            if mapper is None:
                return
            for update in mapper(event):
                loop.call_soon_threadsafe(outbox.put_nowait, update)

        approver = AcpApprover(self.conn, "", loop)
        try:
            session = await self.runner.call(self._start(options, sink, approver))
        except SetupError as exc:
            if resume is not None and exc.message.startswith("no session"):
                raise error(NOT_FOUND, f"no stored session {resume!r}", sessionId=resume) from None
            raise error(-32603, f"whiz could not start the session: {exc.message}") from None
        approver.session_id = session.id
        approver.approvals = session.agent.approvals
        ws = session.agent.ws
        files = None
        if self.fs_read or self.fs_write:
            files = ClientFiles(self.conn, session.id, loop, read=self.fs_read, write=self.fs_write)
            ws.files = files
        holder["mapper"] = mapper = UpdateMapper(ws)
        live = Live(session, outbox, mapper, approver, files)
        live.sender = asyncio.create_task(self._send(session.id, outbox))
        self.sessions[session.id] = live
        return live

    async def _start(self, options: SessionOptions, sink, approver: AcpApprover) -> AgentSession:
        """Open the session on the agent's thread, over the models every session shares."""
        if self._pool is None:
            self._pool = SharedPool(self._pool_given or ModelPool(options.fast, options.deep, notice=_notice))
        return await AgentSession.open(options, sink=sink, notice=_notice, pool=self._pool, approver=approver)

    async def _send(self, session_id: str, outbox: asyncio.Queue) -> None:
        while True:
            update = await outbox.get()
            try:
                await self.conn.session_update(session_id=session_id, update=update)
            except Exception as exc:  # the client went away: the turn still ends and is stored
                log.warning("could not send an update for %s: %s", session_id, exc)
            finally:
                outbox.task_done()

    async def close(self) -> None:
        """Stop every turn, close the sessions and the models; the editor has gone."""
        for live in self.sessions.values():
            self.runner.soon(live.session.cancel)
            if live.sender is not None:
                live.sender.cancel()
        sessions = [live.session for live in self.sessions.values()]
        self.sessions.clear()

        async def _close_all() -> None:
            for session in sessions:
                try:
                    await session.close()
                except Exception as exc:
                    log.warning("closing session %s: %s", session.id, exc)
            if self._pool is not None:
                await self._pool.pool.close()

        try:
            await self.runner.call(_close_all())
        finally:
            self.runner.close()


def _notice(line: str) -> None:
    log.info("%s", line)


async def _turns(session: AgentSession) -> list[tuple[str, str]]:
    """The stored turns' tasks and answers, to replay on `session/load` (on the agent's thread,
    where the session's database connection lives)."""
    return [(record.task, record.message) for record in session.store.turns(session.id)]


async def _list(home: Path, workspace: Path | None) -> list:
    store = SessionStore(home / "sessions.db")
    try:
        return store.list(workspace, limit=50)
    finally:
        store.close()


def prompt_text(blocks: list[Any], root: Path) -> str:
    """The task in a prompt's content blocks: text as it is, a linked file as its path, an embedded
    file with its text. Images and audio are refused (the initialize answer says so)."""
    parts = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(_path_of(block.uri, root))
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            path = _path_of(block.resource.uri, root)
            parts.append(f"{path}:\n```\n{block.resource.text}\n```")
        else:
            kind = getattr(block, "type", type(block).__name__)
            raise invalid(f"whiz reads text prompts; a {kind} block cannot be used")
    task = "\n".join(parts).strip()
    if not task:
        raise invalid("the prompt is empty")
    return task


def _path_of(uri: str, root: Path) -> str:
    """A file URI as a path relative to the workspace where it lies inside it."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return uri
    path = Path(unquote(parsed.path))
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
