"""One turn with the real default model that calls an MCP tool: `whiz exec --mcp` with the notes
server (`tiny_server.py`), and a task that asks for the tool by name. Function tools: the server
decodes the call under the tool's schema, so the 0.5B's call parses and its arguments fit; and
the turn ends with what the tool returned in its answer."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.mcp.conftest import TINY

pytestmark = pytest.mark.model


def items_of(stdout: str) -> list[dict]:
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [e["item"] for e in lines if e["type"] == "item.completed"]


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
    # stderr to a file: only stdout is read as the turn goes, and a full stderr pipe would stall it.
    err_file = tmp_path / "stderr.txt"
    with err_file.open("w") as err:  # the child keeps its own copy
        proc = subprocess.Popen(
            [sys.executable, "-m", "whiz", "exec", "--json", "--base-url", real_server.root,
             "--actions", "tools", "--approval", "read-only", "--mcp", flag, task],
            cwd=repo, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
    # The turn is left to end by itself: once the tool answered, calls that make no progress end
    # it (`ToolStall`) with the note in its answer. The timer only keeps a hung run from hanging
    # the suite; the turn's own time limit is well inside it.
    timer = threading.Timer(420, proc.kill)
    timer.start()
    try:
        stdout, _ = proc.communicate()
    finally:
        timer.cancel()
    stderr = err_file.read_text()
    done = [f"{i['type']} {i.get('tool', '')} {i.get('status', '')} {i.get('text', '')[:80]}"
            for i in items_of(stdout)]  # fmt: skip
    calls = [i for i in items_of(stdout) if i["type"] == "tool_call" and i["tool"] == "notes__read_note"]
    assert calls, (done, stderr[-2000:])
    assert calls[0]["status"] == "completed" and "oat milk" in calls[0]["output"]
    assert proc.returncode == 0, (done, stderr[-2000:])
    said = " ".join(i["text"] for i in items_of(stdout) if i["type"] == "agent_message")
    assert "oat milk" in said, done
