"""Fixtures for the ACP tests: `whiz acp` over a scripted model in a subprocess, driven by the
ACP SDK's own client side, which records what the agent sends and answers as an editor would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("scripted_acp.py")

GREET = 'def say_hello(name):\n    return "Hello, " + name\n'


def sr(path: str, search: str, replace: str) -> str:
    """A SEARCH/REPLACE block as a model writes it."""
    return f"{path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


@dataclass
class Editor:
    """The client side: records updates, answers permission requests from `answers` (option ids;
    None: the turn was cancelled), and serves `fs/*` from `buffers` (unsaved text by path) over
    the disk."""

    answers: list[str | None] = field(default_factory=list)
    buffers: dict[str, str] = field(default_factory=dict)
    updates: list[tuple[str, Any]] = field(default_factory=list)
    asked: list[Any] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: list[tuple[str, str]] = field(default_factory=list)
    permission_delay_s: float = 0.0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(self, session_id: str, tool_call: Any, options: list, **kwargs: Any):
        self.asked.append((tool_call, options))
        if self.permission_delay_s:
            await asyncio.sleep(self.permission_delay_s)
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def read_text_file(self, session_id: str, path: str, line=None, limit=None, **kwargs: Any):
        self.reads.append(path)
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        try:
            return ReadTextFileResponse(content=Path(path).read_text())
        except OSError:
            raise RequestError.resource_not_found(path) from None

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any):
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    def on_connect(self, conn: Any) -> None:
        pass

    def kinds(self) -> list[str]:
        return [u.session_update for _, u in self.updates]

    def text(self) -> str:
        """The agent's message chunks, joined."""
        return "".join(u.content.text for _, u in self.updates if u.session_update == "agent_message_chunk")

    def of(self, kind: str) -> list[Any]:
        return [u for _, u in self.updates if u.session_update == kind]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "greet.py").write_text(GREET)
    return root


@contextlib.asynccontextmanager
async def whiz_acp(
    tmp_path: Path,
    project: Path,
    script: list | dict,
    editor: Editor,
    *,
    fs: bool = False,
    approval: str = "auto-edit",
    sandbox: str = "workspace-write",
) -> AsyncIterator[Any]:
    """`whiz acp` over `script` in `project`, connected and initialized; yields the connection."""
    path = tmp_path / f"script-{len(list(tmp_path.glob('script-*')))}.json"
    path.write_text(json.dumps(script))
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "WHIZ_HOME": str(tmp_path / "home"),
        "WHIZ_TEST_APPROVAL": approval,
        "WHIZ_TEST_SANDBOX": sandbox,
    }
    async with spawn_agent_process(editor, sys.executable, str(SCRIPT), str(path), env=env, cwd=project) as (
        conn,
        process,
    ):
        capabilities = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs))
        init = await asyncio.wait_for(
            conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities), 60
        )
        conn.init = init
        conn.process = process
        yield conn


def replies(*texts: str, delay_s: float = 0.0) -> list[dict]:
    return [{"text": t, "delay_s": delay_s} for t in texts]
