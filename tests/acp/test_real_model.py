"""One `whiz acp` turn with the real default model: an editor's prompt edits a file, and the
edit comes back as a diff in the session's updates."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

from tests.acp.conftest import ROOT, Editor

pytestmark = pytest.mark.model

GREET = """def say_hello(name):
    return "Hello, " + name + "!"


def main():
    print(say_hello("Ada"))
"""


async def test_a_rename_turn_edits_a_file_as_a_diff_and_says_so(real_server, tmp_path: Path) -> None:
    """A rename alone is exact (`editing/rename.py`): the editor sees it as any edit, a diff and the
    agent's message, and the real model behind it is there for a rename that could not be."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "greet.py").write_text(GREET)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "WHIZ_HOME": str(tmp_path / "home")}
    editor = Editor()
    command = ("-m", "whiz", "acp", "--base-url", real_server.root)
    async with spawn_agent_process(editor, sys.executable, *command, env=env, cwd=project) as (conn, _):
        await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), 60)
        new = await conn.new_session(cwd=str(project))
        task = "In greet.py, rename the function say_hello to greet_person, updating every call to it."
        done = await asyncio.wait_for(conn.prompt(session_id=new.session_id, prompt=[text_block(task)]), 240)
    assert done.stop_reason == "end_turn"
    text = (project / "greet.py").read_text()
    assert "def greet_person(name):" in text, text
    edits = [u for u in editor.of("tool_call") if u.kind == "edit" and u.status == "completed"]
    assert edits and edits[-1].content[0].type == "diff"
    assert "def greet_person" in edits[-1].content[0].new_text
    assert editor.of("agent_message_chunk"), "the agent's message streamed"
