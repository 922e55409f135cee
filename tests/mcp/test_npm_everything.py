"""A real MCP server from npm, `@modelcontextprotocol/server-everything`, through a turn whose model
does what the 0.5B did: it echoes as asked, then calls one unrelated tool of the server after
another. `ToolStall` ends the turn after the echo, with the echoed text in its answer, in both
action formats (installed on first use into the whiz cache; skipped only where npm is missing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clients.conftest import npm_client
from tests.mcp.conftest import mcp_agent
from whiz.agent.models.scripted_model import Reply
from whiz.mcp.config import server

PACKAGE, VERSION = "@modelcontextprotocol/server-everything", "2026.8.31"
TASK = "Use the everything__echo tool to echo the message: hello from whiz. Then tell me what it returned."
WANDERING = [
    ("everything__echo", {"message": "hello from whiz"}),
    ("everything__get-annotated-message", {"messageType": "success", "includeImage": False}),
    ("everything__get-structured-content", {"location": "New York"}),
    ("everything__get-resource-links", {"count": 10}),
    ("everything__get-tiny-image", {}),
]


def script(actions: str) -> list:
    """The calls above, one a reply, in the format's own form; the words come only once asked for."""
    if actions == "tools":
        return [Reply(calls=[call]) for call in WANDERING] + ["The tool returned: Echo: hello from whiz"]
    return [f"CALL {name} {json.dumps(args)}" for name, args in WANDERING] + [
        "It returned Echo: hello from whiz"
    ]


@pytest.mark.parametrize("actions", ["tools", "text"])
async def test_the_echo_task_ends_after_the_echo_with_it_in_the_answer(project: Path, actions: str) -> None:
    program = npm_client(PACKAGE, VERSION, "mcp-server-everything")
    everything = server("everything", {"command": str(program), "startup_timeout_sec": 60}, "test")
    async with mcp_agent(project, script(actions), [everything], actions=actions) as h:
        result = await h.agent.run(TASK)
    assert result.ok, result.message
    assert "Echo: hello from whiz" in result.message
    assert h.said == ["MCP server everything: 13 tools"]
    [echo] = h.events.items("tool_call")  # the unrelated tools were never called
    assert echo["tool"] == "everything__echo" and echo["output"] == "Echo: hello from whiz"
    [stall] = h.events.items("tool_stall")
    assert stall["tool"] == "everything__get-annotated-message" and stall["answered_from"] == [
        "everything__echo"
    ]
    assert len(h.model.requests) == 3  # the echo, the call not made, the answer
