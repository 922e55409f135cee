"""Fixtures for the MCP tests: the SDK-written notes server (`tiny_server.py`) over stdio and
streamable HTTP, and an agent over a scripted model with the servers' tools."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.agent.conftest import Harness
from tests.agent.conftest import harness as harness  # the fixtures, for these tests
from tests.agent.conftest import project as project
from tests.conftest import free_port
from whiz.mcp.config import McpServerConfig, server
from whiz.mcp.tools import McpTools

TINY = Path(__file__).with_name("tiny_server.py")


@pytest.fixture
def notes(project: Path) -> Path:
    """The notes server's folder (inside the project), with one note: shop."""
    folder = project / "notes"
    folder.mkdir()
    (folder / "shop.txt").write_text("buy milk\n")
    return folder


def stdio_notes(notes: Path, **options) -> McpServerConfig:
    """The notes server, started over stdio."""
    table = {"command": sys.executable, "args": [str(TINY), "stdio"], "env": {"NOTES_DIR": str(notes)}}
    return server("notes", {**table, **options}, "test")


@pytest.fixture
def http_notes(notes: Path) -> Iterator[str]:
    """The notes server on streamable HTTP, in a subprocess; its endpoint's URL."""
    port = free_port()
    env = {"NOTES_DIR": str(notes), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, str(TINY), "http", str(port)], env=env, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the HTTP notes server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.asynccontextmanager
async def mcp_agent(root: Path, replies: list, servers: list[McpServerConfig], **config) -> AsyncIterator:
    """An agent over `replies` with the servers' tools; `said` holds the notices a user would see."""
    said: list[str] = []
    tools = McpTools(servers, cwd=root, log_dir=root.parent / "mcp-logs", notice=said.append)
    h = Harness(root, replies, **config)
    h.said = said  # type: ignore[attr-defined]
    h.agent.tools.external = tools.start()
    try:
        yield h
    finally:
        await tools.close()
