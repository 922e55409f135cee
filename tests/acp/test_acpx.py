"""A real ACP client, `acpx` (npm, headless), driving `whiz acp` over the scripted model through a
multi-turn edit: a session made once, two prompts in it, each edit reaching the file (through the
client's own `fs/write_text_file`, which acpx offers) and reported as an edit with its diff."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.acp.conftest import GREET, ROOT, SCRIPT, sr
from tests.clients.conftest import npm_client

ACPX_VERSION = "0.19.1"


def acpx(binary: Path, tmp_path: Path, project: Path, *args: str, check: bool = True) -> list[dict]:
    """Run acpx against `whiz acp` over the script in tmp_path; its JSON output, one message a line.
    acpx keeps the agent running between prompts (for `--ttl` seconds), as an editor does."""
    agent = f"{sys.executable} {SCRIPT} {tmp_path / 'script.json'}"
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),  # acpx keeps its sessions under HOME
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "WHIZ_HOME": str(tmp_path / "whiz-home"),
    }
    command = [str(binary), "--agent", agent, "--cwd", str(project), "--approve-all", "--ttl", "5"]
    done = subprocess.run(
        [*command, "--format", "json", *args], env=env, capture_output=True, text=True, timeout=180,
        check=False, cwd=project,
    )  # fmt: skip
    assert done.returncode == 0 or not check, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def edits(messages: list[dict]) -> list[dict]:
    """The edit tool calls whiz reported."""
    updates = [m["params"]["update"] for m in messages if m.get("method") == "session/update"]
    return [u for u in updates if u.get("sessionUpdate") == "tool_call" and u.get("kind") == "edit"]


def test_acpx_drives_a_multi_turn_edit(tmp_path: Path) -> None:
    binary = npm_client("acpx", ACPX_VERSION, "acpx")
    project = tmp_path / "project"
    project.mkdir()
    (project / "greet.py").write_text(GREET)
    (tmp_path / "home").mkdir()
    script = [
        {"text": sr("greet.py", "def say_hello(name):", "def greet(name):")},
        {"text": sr("greet.py", '    return "Hello, " + name', '    return f"Hello, {name}!"')},
    ]
    (tmp_path / "script.json").write_text(json.dumps(script))
    try:
        acpx(binary, tmp_path, project, "sessions", "new")
        first = acpx(binary, tmp_path, project, "prompt", "Rename say_hello to greet in greet.py")
        assert (project / "greet.py").read_text().startswith("def greet(name):")
        [edit] = edits(first)
        assert edit["status"] == "completed"
        assert edit["content"][0]["oldText"] == GREET
        writes = [m for m in first if m.get("method") == "fs/write_text_file"]
        assert writes, "acpx offers fs/*, so the edit went through it"
        second = acpx(binary, tmp_path, project, "prompt", "Make greet say Hello, name! with an f-string")
        assert (project / "greet.py").read_text() == 'def greet(name):\n    return f"Hello, {name}!"\n'
        [edit] = edits(second)
        assert edit["content"][0]["oldText"].startswith("def greet(name):")
        answers = [m["result"] for m in first + second if "stopReason" in (m.get("result") or {})]
        assert [a["stopReason"] for a in answers] == ["end_turn", "end_turn"]
    finally:
        acpx(binary, tmp_path, project, "sessions", "close", check=False)  # and with it, whiz acp
