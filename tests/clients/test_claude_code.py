"""Claude Code against whiz's Anthropic Messages API: the model asks to write a file, Claude Code
writes it, and the turn ends with the model's answer."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import client_engine, npm_client

CLAUDE_CODE_VERSION = "2.1.330"


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return npm_client("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude")


def write_then_answer(path: Path):
    """A model that calls Claude Code's Write tool once, then says what it did."""

    def script(conversation: str) -> str:
        if "<tool_response>" in conversation.rsplit("<|im_start|>user", 1)[-1]:
            return "I wrote hello.py."
        call = {"name": "Write", "arguments": {"file_path": str(path), "content": "print('hello')\n"}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"

    return script


def test_claude_code_writes_a_file_through_whiz(claude_bin, serve_fake, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    served = serve_fake(
        script=write_then_answer(work / "hello.py"), engine_kw=client_engine(65536), api_keys=["k1"]
    )
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),  # a fresh Claude Code profile
        "ANTHROPIC_BASE_URL": served.root,
        "ANTHROPIC_API_KEY": "k1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    done = subprocess.run(
        [str(claude_bin), "-p", "Write hello.py that prints hello", "--permission-mode", "acceptEdits",
         "--model", "whiz"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (work / "hello.py").read_text() == "print('hello')\n"
    assert "I wrote hello.py." in done.stdout
