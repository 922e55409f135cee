"""A real MCP server from npm, `@modelcontextprotocol/server-filesystem`, through a turn: the agent
lists the workspace's files and reads one with the server's tools (installed on first use into
the whiz cache, as a user would; skipped only where npm is missing)."""

from __future__ import annotations

from pathlib import Path

from tests.clients.conftest import npm_client
from tests.mcp.conftest import mcp_agent
from whiz.agent.approvals import Approvals, ScriptedApprover
from whiz.agent.models.scripted_model import Reply
from whiz.mcp.config import server

PACKAGE, VERSION = "@modelcontextprotocol/server-filesystem", "2026.8.31"


async def test_the_filesystem_server_lists_and_reads_a_file_in_a_turn(project: Path) -> None:
    program = npm_client(PACKAGE, VERSION, "mcp-server-filesystem")
    files = server("fs", {"command": str(program), "args": [str(project)], "startup_timeout_sec": 60}, "test")
    listing = Reply(calls=[("fs__list_directory", {"path": str(project)})])
    reading = Reply(calls=[("fs__read_text_file", {"path": str(project / "greet.py")})])
    approver = ScriptedApprover([])  # both tools say they only read: nothing is asked
    config = {"actions": "tools", "approvals": Approvals("auto-edit", approver)}
    async with mcp_agent(project, [listing, reading, "greet.py says hello."], [files], **config) as h:
        result = await h.agent.run("Which files are there, and what does greet.py hold?")
    assert result.ok, result.message
    offered = {t["name"] for t in h.model.requests[0].tools}
    assert {"fs__list_directory", "fs__read_text_file", "fs__write_file"} <= offered
    listed = h.model.requests[1].items[-1]["output"]
    assert "greet.py" in listed and "README.md" in listed
    read = h.model.requests[2].items[-1]["output"]
    assert "def say_hello(name):" in read
    assert approver.asked == []
    assert [i["status"] for i in h.events.items("tool_call")] == ["completed", "completed"]


async def test_a_writing_tool_of_the_filesystem_server_is_refused_in_read_only(project: Path) -> None:
    program = npm_client(PACKAGE, VERSION, "mcp-server-filesystem")
    files = server("fs", {"command": str(program), "args": [str(project)], "startup_timeout_sec": 60}, "test")
    write = Reply(calls=[("fs__write_file", {"path": str(project / "new.txt"), "content": "x"})])
    config = {"actions": "tools", "approval": "read-only"}
    async with mcp_agent(project, [write, "I cannot write here."], [files], **config) as h:
        await h.agent.run("Write new.txt")
    assert not (project / "new.txt").exists()
    assert "fs__write_file" not in {t["name"] for t in h.model.requests[0].tools}
    assert "no tool named 'fs__write_file'" in h.model.requests[1].items[-1]["output"]
