"""The Codex CLI completes a `codex exec` turn against whiz over the Responses WebSocket.

Codex is installed once from npm into the whiz cache (it ships its own binary). Its warm-up
(`generate: false`, with its ~6k-token prompt) must be answered on the same connection, so that
the real turn chains with `previous_response_id` and finds the prompt in the KV cache.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.model

CODEX_VERSION = "0.169.0"


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed; the Codex CLI comes from npm")
    prefix = (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "whiz" / f"codex-{CODEX_VERSION}"
    )
    binary = prefix / "node_modules" / ".bin" / "codex"
    if not binary.exists():
        subprocess.run(
            [
                "npm",
                "install",
                "--silent",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(prefix),
                f"@openai/codex@{CODEX_VERSION}",
            ],
            check=True,
            timeout=600,
        )
    return binary


def metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


# Codex's ~6k-token prompt is a cold prefill (over two minutes on 2 cores with the exact kernels),
# so this test needs more than the suite's default 300 s on a busy machine.
@pytest.mark.timeout(600)
def test_codex_exec_runs_a_turn_over_the_websocket(codex_bin, real_server, tmp_path):
    home = tmp_path / "codex-home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "hello.py").write_text('print("hi")\n')
    (home / "config.toml").write_text(
        f"""model = "whiz"
model_provider = "whiz"
approval_policy = "never"
sandbox_mode = "workspace-write"

[model_providers.whiz]
name = "whiz"
base_url = "{real_server.base_url}"
wire_api = "responses"
supports_websockets = true
stream_max_retries = 0
"""
    )
    before = httpx.get(f"{real_server.root}/metrics").text
    env = {**os.environ, "CODEX_HOME": str(home), "RUST_LOG": "codex_api=debug"}
    done = subprocess.run(
        [str(codex_bin), "exec", "--skip-git-repo-check", "Reply with one short sentence: what is hello.py?"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    after = httpx.get(f"{real_server.root}/metrics").text
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "codex printed no final message"
    log = done.stderr
    assert "successfully connected to Responses WebSocket" in log
    assert "falling back to HTTP" not in log
    # One connection: the warm-up and the turn on it, the turn chained to the warm-up.
    assert log.count("connecting to Responses WebSocket") == 1
    ws_turns = metric(after, 'whiz_requests_total{api="responses.ws"}') - metric(
        before, 'whiz_requests_total{api="responses.ws"}'
    )
    http_turns = metric(after, 'whiz_requests_total{api="responses.http"}') - metric(
        before, 'whiz_requests_total{api="responses.http"}'
    )
    assert ws_turns >= 2 and http_turns == 0
    cached = metric(after, "whiz_cached_tokens_total") - metric(before, "whiz_cached_tokens_total")
    assert cached > 4000  # the turn found Codex's system prompt and tools already prefilled
