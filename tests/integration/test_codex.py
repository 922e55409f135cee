"""The Codex CLI completes a `codex exec` turn against whiz over the Responses WebSocket.

Codex is installed once from npm into the whiz cache (it ships its own binary). Its warm-up
(`generate: false`, with its whole prompt) must be answered on the same connection, so that the
real turn chains with `previous_response_id` and finds the prompt in the KV cache.

Codex's own instructions are replaced by a short file (`model_instructions_file`) and its
multi-agent and goal tools are off (`[features]`): its shell and other tools and the turn stay as
Codex sends them, and the prompt is about a sixth of the stock one (37 KB, ~8k tokens), whose cold
prefill alone takes minutes on two busy cores and proves nothing more about the wire. The
stock prompt's cold and restored turns are `whiz bench serve`'s and `test_codex_restart`'s.
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


INSTRUCTIONS = """You are Codex, a coding agent in the user's terminal. Read files with the shell
tool before you answer questions about them. Keep answers short.
"""


# On a fresh machine the fixture installs Codex from npm first: more than the suite's default
# 300 s is allowed.
@pytest.mark.timeout(600)
def test_codex_exec_runs_a_turn_over_the_websocket(codex_bin, real_server, tmp_path):
    home = tmp_path / "codex-home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "hello.py").write_text('print("hi")\n')
    (home / "instructions.md").write_text(INSTRUCTIONS)
    (home / "config.toml").write_text(
        f"""model = "whiz"
model_instructions_file = "{home / "instructions.md"}"
model_provider = "whiz"
approval_policy = "never"
sandbox_mode = "workspace-write"

[model_providers.whiz]
name = "whiz"
base_url = "{real_server.base_url}"
wire_api = "responses"
supports_websockets = true
stream_max_retries = 0

[features]
multi_agent = false
goals = false
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
    prompt = metric(after, "whiz_prompt_tokens_total") - metric(before, "whiz_prompt_tokens_total")
    # The turn found Codex's instructions and tools already prefilled by the warm-up: of the two
    # requests' prompt tokens, the turn's repeat of the warm-up's is served from the cache.
    assert cached > 800 and cached > 0.4 * prompt, (cached, prompt)
