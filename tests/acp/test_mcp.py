"""MCP servers the editor hands a session: started for it, their tools offered and called in its
turns, and a kind whiz cannot reach refused with a clear error."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from acp import RequestError, text_block
from acp.schema import EnvVariable, McpServerStdio, SseMcpServer

from tests.acp.conftest import Editor, replies, whiz_acp
from tests.mcp.conftest import TINY
from whiz.acp.mcp import editor_servers, merged, tool_prefix
from whiz.mcp.config import server


def notes_server(folder: Path, name: str = "notes") -> McpServerStdio:
    folder.mkdir(exist_ok=True)
    (folder / "shop.txt").write_text("buy milk\n")
    env = [EnvVariable(name="NOTES_DIR", value=str(folder))]
    return McpServerStdio(name=name, command=sys.executable, args=[str(TINY), "stdio"], env=env)


async def test_the_editors_mcp_server_is_started_and_its_tool_called_in_a_turn(tmp_path, project) -> None:
    editor = Editor()
    script = replies('CALL my_notes__read_note {"name": "shop"}', "The note says buy milk.")
    async with whiz_acp(tmp_path, project, script, editor) as conn:
        assert conn.init.agent_capabilities.mcp_capabilities.http
        assert not conn.init.agent_capabilities.mcp_capabilities.sse
        new = await conn.new_session(cwd=str(project), mcp_servers=[notes_server(tmp_path / "n", "my notes")])
        done = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[text_block("What does my shop note say?")]), 60
        )
    assert done.stop_reason == "end_turn"
    [call] = [u for u in editor.of("tool_call") if u.title.startswith("my_notes__read_note")]
    [finished] = [u for u in editor.of("tool_call_update") if u.tool_call_id == call.tool_call_id]
    assert finished.status == "completed" and "buy milk" in finished.content[0].content.text


async def test_an_sse_server_is_refused_with_a_reason_and_the_connection_goes_on(tmp_path, project) -> None:
    sse = SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/sse", headers=[])
    async with whiz_acp(tmp_path, project, replies("hi"), Editor()) as conn:
        with pytest.raises(RequestError) as refused:
            await conn.new_session(cwd=str(project), mcp_servers=[sse])
        assert "streamable HTTP" in str(refused.value.data or refused.value)
        assert (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id


def test_the_editors_server_replaces_a_configured_one_of_the_same_name(tmp_path) -> None:
    mine = server("notes", {"command": "configured-notes"}, "test")
    other = server("files", {"command": "files"}, "test")
    [theirs] = editor_servers([notes_server(tmp_path / "n")])
    assert [s.command for s in merged([mine, other], [theirs])] == ["files", sys.executable]
    assert tool_prefix("My Notes!") == "My_Notes" and tool_prefix("***") == "mcp"
