"""The web app's workspace: `whiz serve --workspace DIR` lets the page browse DIR, ask for an edit,
accept or reject it, undo, and run the configured test command.

Routes (all under /whiz/workspace; JSON; the API key when keys are set; browsers only from the
server's own page, see `browser.py`):

    GET  ""              {name, test_cmd}
    GET  /files          {files: [path, ...], truncated}
    GET  /file?path=P    {path, content, size_bytes}
    GET  /edits          {edits: [pending edit, ...]}
    POST /edit           {path, instruction, model?} -> {edit, reply, whiz}; 422 no_edit when the reply
                         holds no usable edit (with the reply, so the user sees what the model said)
    POST /accept         {id} -> {applied: [path, ...]}; 409 when a file changed since the proposal.
                         The id is a pending edit's or a healing candidate's (`heal.py`).
    POST /reject         {id} -> {rejected: id}
    POST /undo           -> {restored: [path, ...]}; 409 when there is nothing to undo
    POST /test           -> {command, exit_code, output, duration_ms, timed_out}

Healing (`POST /heal`, `GET /candidates`) is in `heal.py`; its candidates are offered here
as edits, so accepting one is the same accept, with the same undo.

Every path goes through `Workspace.resolve`, so nothing outside DIR is reachable. A proposed edit is
only planned (nothing is written) until it is accepted; accepting records the files' before-images
in an `UndoStore` (outside the project) and writes all files atomically with `apply_changes`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from whiz.agent.editing.edits import EditError, FileChange, apply_changes, plan_edits, unified_diff
from whiz.agent.editing.undo import UndoStore
from whiz.agent.project.workspace import Workspace
from whiz.config import ServeSettings
from whiz.environments import SandboxOptions, environment_for
from whiz.environments.home import SandboxConfigError, allow_list
from whiz.environments.local import CommandResult
from whiz.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge, WhizError
from whiz.modes.session import tidy_workspace
from whiz.server.protocol import decode_json, parse
from whiz.web.proposal import EditProposer, ModelEditProposer

if TYPE_CHECKING:
    from whiz.server.state import ServerState

log = logging.getLogger("whiz.server")

MAX_FILE_BYTES = 1_000_000
"""Largest file the page may open (and so ask an edit for)."""
MAX_FILES_LISTED = 2000
MAX_PENDING = 50
"""Pending edits kept at once; the oldest is dropped past this."""


class NoEdit(WhizError):
    """The model answered, but with no edit that can be applied to the file."""

    status = 422
    type = "invalid_request_error"
    code = "no_edit"

    def __init__(self, message: str, *, reply: str, whiz: dict | None):
        super().__init__(message)
        self.reply = reply
        self.whiz = whiz


class EditBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=4096)
    instruction: str = Field(min_length=1, max_length=8000)
    model: str | None = None


class IdBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=200)


@dataclass
class PendingEdit:
    """A proposed edit: planned file changes, nothing written yet."""

    id: str
    path: str
    instruction: str
    changes: list[FileChange]
    created_at: float = field(default_factory=time.time)
    state: Literal["pending", "accepted", "rejected"] = "pending"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": self.path,
            "instruction": self.instruction,
            "created_at": self.created_at,
            "changes": [
                {
                    "path": c.path,
                    "diff": unified_diff(c),
                    "created": c.before is None,
                    "deleted": c.after is None,
                }
                for c in self.changes
            ],
        }


def default_undo_dir(home: Path, root: Path) -> Path:
    """Where the web app keeps undo snapshots for a workspace: outside it, one folder per workspace."""
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return home / "undo" / f"web-{digest}"


class WorkspaceService:
    """Pending edits, accept/reject/undo and the test command, for one workspace."""

    def __init__(
        self,
        workspace: Workspace,
        undo: UndoStore,
        proposer: EditProposer,
        *,
        test_cmd: str | None = None,
        test_timeout_s: float = 300,
        sandbox: SandboxOptions | None = None,
    ):
        self.workspace = workspace
        self.undo_store = undo
        self.proposer = proposer
        self.test_cmd = test_cmd
        # The page's test command runs confined like the agent's: the workspace, no network, and of
        # the home only what the user allowed (`sandbox`: the config file's `[sandbox] allow`).
        self.environment = environment_for(
            workspace.root, sandbox or SandboxOptions(), timeout_s=test_timeout_s
        )
        self.pending: dict[str, PendingEdit] = {}
        self.offered: dict[str, PendingEdit] = {}
        """Healing candidates, acceptable like pending edits; they stay listed once decided."""
        self._accepted: dict[str, PendingEdit] = {}
        """Accepted edits by id (the undo store's turn id), so that undoing one reopens it."""
        self._tests = asyncio.Lock()

    def read(self, rel: str) -> str:
        path = self.workspace.resolve(rel)
        if not path.is_file():
            raise NotFound(f"No file '{rel}' in the workspace.", param="path")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise PayloadTooLarge(f"'{rel}' is larger than {MAX_FILE_BYTES // 1000} kB.", param="path")
        return self.workspace.read_text(rel)

    async def propose(self, rel: str, instruction: str, model: str | None) -> tuple[PendingEdit, Any]:
        content = self.read(rel)
        target = self.workspace.relative(self.workspace.resolve(rel))
        proposal = await self.proposer.propose(target, content, instruction, model)
        whiz = proposal.response.get("whiz")
        status = proposal.response.get("status")
        if status not in ("completed", "incomplete"):
            error = proposal.response.get("error") or {}
            raise NoEdit(
                f"The model did not finish ({status}): {error.get('message', 'no reason given')}",
                reply=proposal.reply,
                whiz=whiz,
            )
        if proposal.parse_error:
            raise NoEdit(proposal.parse_error, reply=proposal.reply, whiz=whiz)
        # The request was about one file: edits to others (an echoed example, a placeholder path)
        # would only surprise the user.
        mine = [e for e in proposal.edits if self._same(e.path, target)]
        if not mine:
            raise NoEdit(f"The model's reply holds no edit to {target}.", reply=proposal.reply, whiz=whiz)
        try:
            changes = plan_edits(self.workspace, mine)
        except EditError as exc:
            raise NoEdit(exc.message, reply=proposal.reply, whiz=whiz) from None
        if not changes:
            raise NoEdit(f"The model's edit leaves {target} as it is.", reply=proposal.reply, whiz=whiz)
        edit = PendingEdit("edit_" + uuid.uuid4().hex[:12], target, instruction, changes)
        self.pending[edit.id] = edit
        while len(self.pending) > MAX_PENDING:
            self.pending.pop(next(iter(self.pending)))
        return edit, proposal

    def _same(self, path: str, target: str) -> bool:
        try:
            return self.workspace.relative(self.workspace.resolve(path)) == target
        except WhizError:
            return False

    def offer(self, edits: list[PendingEdit]) -> None:
        """Offer edits that were made elsewhere (a heal's candidates), replacing the last offer."""
        self.offered = {e.id: e for e in edits}

    def _take(self, edit_id: str) -> PendingEdit:
        edit = self.pending.get(edit_id) or self.offered.get(edit_id)
        if edit is None or edit.state != "pending":
            raise NotFound(f"No pending edit '{edit_id}' (accepted, rejected, or never made).", param="id")
        return edit

    def _decide(self, edit: PendingEdit, state: Literal["accepted", "rejected"]) -> None:
        edit.state = state
        self.pending.pop(edit.id, None)
        if state == "accepted":
            self._accepted[edit.id] = edit

    def accept(self, edit_id: str) -> list[str]:
        """Write the edit's files atomically, undoably. The edit stays pending if a file changed since."""
        edit = self._take(edit_id)
        for change in edit.changes:
            path = self.workspace.resolve(change.path)
            current = self.workspace.read_text(change.path) if path.is_file() else None
            if current != change.before:
                raise Conflict(
                    f"{change.path} changed on disk since this edit was proposed; reject it and ask again.",
                    param="id",
                )
        self.undo_store.record(edit.id, edit.changes, self.workspace)
        apply_changes(self.workspace, edit.changes)
        self._decide(edit, "accepted")
        return [c.path for c in edit.changes]

    def reject(self, edit_id: str) -> None:
        self._decide(self._take(edit_id), "rejected")

    def undo(self) -> list[str]:
        """Restore the files of the latest accepted edit; the edit is pending again (acceptable anew)."""
        undone = self.undo_store.undo(self.workspace)
        if undone is None:
            raise Conflict("Nothing to undo: no accepted edit is recorded.", code="nothing_to_undo")
        edit = self._accepted.pop(undone.turn_id, None)
        if edit is not None:
            # A candidate card or proposal that still said "accepted" would misstate the files.
            edit.state = "pending"
            if edit.id not in self.offered:
                self.pending[edit.id] = edit
        return undone.restored

    def require_test_cmd(self) -> str:
        """The configured test command; a clear 409 when there is none."""
        if not self.test_cmd:
            raise Conflict(
                "No test command is configured; start whiz serve with --test-cmd.", code="no_test_command"
            )
        return self.test_cmd

    async def test(self, *, wait: bool = False) -> CommandResult:
        """Run the test command in the workspace, one run at a time: a second one gets a 409, or
        with `wait` runs after the first (a heal's baseline waits for the user's run)."""
        command = self.require_test_cmd()
        if self._tests.locked() and not wait:
            raise Conflict("The tests are already running.", code="tests_running")
        async with self._tests:
            return await self.environment.run(command)


async def json_body(state: ServerState, request: Request, model: type[BaseModel]) -> Any:
    """The JSON body parsed as `model` (an empty body is `{}`). The Host, Origin and key checks
    came before, for every route (`server/guards.py`)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        # Also keeps plain HTML forms on other sites from posting here.
        raise InvalidRequest(
            "Send a JSON body with Content-Type: application/json.", code="unsupported_media_type"
        )
    raw = await state.read_body(request)
    return parse(model, decode_json(raw) if raw else {})


def workspace_routes(state: ServerState, service: WorkspaceService) -> list[BaseRoute]:
    """The routes of the module docstring, over `service`."""

    async def body_of(request: Request, model: type[BaseModel]) -> Any:
        return await json_body(state, request, model)

    async def info(request: Request) -> Response:
        return JSONResponse({"name": service.workspace.root.name, "test_cmd": service.test_cmd})

    async def files(request: Request) -> Response:
        found = service.workspace.list_files(".", limit=MAX_FILES_LISTED + 1)
        return JSONResponse({"files": found[:MAX_FILES_LISTED], "truncated": len(found) > MAX_FILES_LISTED})

    async def file(request: Request) -> Response:
        rel = request.query_params.get("path")
        if not rel:
            raise InvalidRequest("Give the file as ?path=relative/path.", param="path")
        content = service.read(rel)
        return JSONResponse({"path": rel, "content": content, "size_bytes": len(content.encode())})

    async def edits(request: Request) -> Response:
        return JSONResponse({"edits": [e.to_dict() for e in service.pending.values()]})

    async def edit(request: Request) -> Response:
        body = await body_of(request, EditBody)
        try:
            pending, proposal = await service.propose(body.path, body.instruction, body.model)
        except NoEdit as exc:
            return JSONResponse(
                {"error": exc.to_dict(), "reply": exc.reply, "whiz": exc.whiz}, status_code=exc.status
            )
        state.metrics.finished(proposal.response)
        return JSONResponse(
            {"edit": pending.to_dict(), "reply": proposal.reply, "whiz": proposal.response.get("whiz")}
        )

    async def accept(request: Request) -> Response:
        body = await body_of(request, IdBody)
        return JSONResponse({"applied": service.accept(body.id)})

    async def reject(request: Request) -> Response:
        body = await body_of(request, IdBody)
        service.reject(body.id)
        return JSONResponse({"rejected": body.id})

    async def undo(request: Request) -> Response:
        await body_of(request, Empty)
        return JSONResponse({"restored": service.undo()})

    async def test(request: Request) -> Response:
        await body_of(request, Empty)
        result = await service.test()
        return JSONResponse(
            {
                "command": result.command,
                "exit_code": result.exit_code,
                "output": result.output,
                "duration_ms": round(result.duration_ms, 1),
                "timed_out": result.timed_out,
            }
        )

    base = "/whiz/workspace"
    return [
        Route(base, info, methods=["GET"]),
        Route(f"{base}/files", files, methods=["GET"]),
        Route(f"{base}/file", file, methods=["GET"]),
        Route(f"{base}/edits", edits, methods=["GET"]),
        Route(f"{base}/edit", edit, methods=["POST"]),
        Route(f"{base}/accept", accept, methods=["POST"]),
        Route(f"{base}/reject", reject, methods=["POST"]),
        Route(f"{base}/undo", undo, methods=["POST"]),
        Route(f"{base}/test", test, methods=["POST"]),
    ]


class Empty(BaseModel):
    """A body that must hold nothing (POST /undo, /test)."""

    model_config = ConfigDict(extra="forbid")


def check_settings(settings: ServeSettings) -> None:
    """Refuse workspace settings that cannot work, before the model loads."""
    if settings.workspace is not None and not settings.workspace.is_dir():
        raise InvalidRequest(f"--workspace {settings.workspace} is not a folder.", param="workspace")
    if settings.test_cmd and settings.workspace is None:
        raise InvalidRequest("--test-cmd runs in the workspace; give --workspace DIR too.", param="test_cmd")


def build_workspace(state: ServerState, root: Path, undo_dir: Path) -> WorkspaceService:
    """The service for `--workspace root`, proposing edits with this server's own engine."""
    from whiz.config_file import ConfigFile  # the config file the CLI reads `[sandbox]` from

    check_settings(state.settings)
    try:
        allowed = allow_list(ConfigFile.read())
    except SandboxConfigError as exc:
        raise InvalidRequest(str(exc), param="sandbox") from None
    tidy_workspace(root, lambda line: log.warning("%s", line))
    return WorkspaceService(
        Workspace(root),
        UndoStore(undo_dir),
        ModelEditProposer(state.backend),
        test_cmd=state.settings.test_cmd,
        test_timeout_s=state.settings.test_timeout_s,
        sandbox=SandboxOptions(allow=allowed),
    )
