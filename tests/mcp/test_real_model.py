"""One turn with the real default model that calls an MCP tool: `whiz exec --mcp` with the notes
server (`tiny_server.py`), and a task that asks for the tool by name. Function tools: the server
decodes the call under the tool's schema, so the 0.5B's call parses and its arguments fit."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import TINY

pytestmark = pytest.mark.model


@pytest.mark.timeout(600)  # the shared real server's start counts too, on a busy machine
def test_the_model_calls_an_mcp_tool_in_a_turn(real_server, tmp_path: Path) -> None:
    repo, notes = tmp_path / "repo", tmp_path / "notes"
    repo.mkdir()
    notes.mkdir()
    (repo / "README.md").write_text("# groceries\n")
    (notes / "shop.txt").write_text("buy oat milk and two lemons\n")
    flag = f"notes={shlex.join([sys.executable, str(TINY), 'stdio', str(notes)])}"
    task = "Call the notes__read_note tool with name shop, then tell me what the note says."
    env = {**os.environ, "WHIZ_HOME": str(tmp_path / "home"), "WHIZ_CONFIG": str(tmp_path / "none.toml")}
    done = subprocess.run(
        [sys.executable, "-m", "whiz", "exec", "--json", "--base-url", real_server.root,
         "--actions", "tools", "--mcp", flag, task],
        cwd=repo, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    items = [e["item"] for e in events if e["type"] == "item.completed"]
    calls = [i for i in items if i["type"] == "tool_call" and i["tool"] == "notes__read_note"]
    assert calls, done.stdout[-3000:]
    assert calls[0]["status"] == "completed" and "oat milk" in calls[0]["output"]
