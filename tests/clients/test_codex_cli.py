"""The Codex CLI with its own tools against whiz over HTTP: the model calls `apply_patch` (a custom,
free-form tool), the CLI applies the patch, and the turn ends. Over the WebSocket, which the
provider `whiz setup codex` writes asks for, the same turn runs in `test_setup_clients.py`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from whiz.bench.codex_restart import configure_codex

from .conftest import client_engine, npm_client
from .programs import CODEX_VERSION

PATCH = "*** Begin Patch\n*** Update File: hello.py\n@@\n-print('hi')\n+print('hello')\n*** End Patch\n"


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return npm_client("@openai/codex", CODEX_VERSION, "codex")


def patch_then_answer(conversation: str) -> str:
    if "<tool_response>" in conversation.rsplit("<|im_start|>user", 1)[-1]:
        return "I changed hello.py to print hello."
    call = {"name": "apply_patch", "arguments": {"input": PATCH}}
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


def test_codex_applies_a_patch_the_model_writes_over_http(codex_bin, serve_fake, tmp_path):
    served = serve_fake(script=patch_then_answer, engine_kw=client_engine(65536))
    home, work = tmp_path / "codex-home", tmp_path / "work"
    # Codex's own workspace-write sandbox cannot write on this CI machine (a container, as root):
    # the config lets it write its temporary folder directly.
    configure_codex(home, served.root, websocket=False)
    work.mkdir()
    (work / "hello.py").write_text("print('hi')\n")
    env = {**os.environ, "CODEX_HOME": str(home), "RUST_LOG": "codex_api=debug"}
    done = subprocess.run(
        [str(codex_bin), "exec", "--skip-git-repo-check", "Make hello.py print hello"],
        cwd=work, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (work / "hello.py").read_text() == "print('hello')\n"
    assert "I changed hello.py" in done.stdout
    assert "Model metadata for" not in done.stderr  # the catalog whiz serves describes the model
    assert "successfully connected to Responses WebSocket" not in done.stderr
