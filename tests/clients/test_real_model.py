"""Each client in the matrix through one turn with the real default model, beside the scripted
edits of the other files here: the program starts, talks to `whiz serve` in its own protocol, gets
the model's streamed answer and ends its turn cleanly.

The clients are trimmed to a short prompt and one tool or none, as their own flags allow: their
full prompts run to 8-20k tokens (Qwen Code's skills and reminders, Claude Code's tools), minutes
of cold prefill on two cores per test. What is trimmed is what the client sends, not how whiz
answers it. The 0.5B's answer is not asserted (that is the model's skill); that a whole turn came
back through the real engine is.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from .conftest import cache_lock, folders, npm_client
from .programs import (
    CLAUDE_CODE_VERSION,
    OPENCODE_VERSION,
    QWEN_CODE_VERSION,
    aider_client,
    opencode_setup,
    qwen_code_env,
)

pytestmark = pytest.mark.model

QUESTION = "What is 7 + 1? Answer with the number only."
SYSTEM = "You are a helpful assistant. Answer briefly."


def engine_steps(server) -> int:
    return httpx.get(f"{server.root}/health", timeout=10).json()["load"]["engine_steps"]


def run_turn(server, command: list[str], work: Path, env: dict[str, str]) -> str:
    """Run one client turn and return what it printed; the turn must end cleanly and must have
    been decoded by the server's engine."""
    before = engine_steps(server)
    done = subprocess.run(
        command, cwd=work, env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert engine_steps(server) > before, "the client's turn never reached the engine"
    return done.stdout


def test_claude_code_answers_with_the_real_model(real_server, tmp_path):
    claude = npm_client("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude")
    work, home = folders(tmp_path)
    env = {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": real_server.root,
        "ANTHROPIC_API_KEY": "unused",  # the shared real server has no keys
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    command = [str(claude), "-p", QUESTION, "--bare", "--system-prompt", SYSTEM, "--tools", "Read"]
    out = run_turn(real_server, [*command, "--model", "whiz"], work, env)
    assert out.strip(), "Claude Code printed no answer"


def test_qwen_code_answers_with_the_real_model(real_server, tmp_path):
    qwen = npm_client("@qwen-code/qwen-code", QWEN_CODE_VERSION, "qwen")
    work, home = folders(tmp_path)
    env = qwen_code_env(home, real_server.base_url)
    # --bare drops the skills and context files, --exclude-tools what is left of its tools. With
    # read_file kept, the 0.5B sometimes asks for a made-up file.txt again and again, and Qwen
    # Code's loop guard ends the run with an error: the model's skill, not the protocol.
    trim = ["--bare", "--exclude-tools", "edit", "notebook_edit", "run_shell_command", "get_goal"]
    trim += ["update_goal", "read_file"]
    out = run_turn(real_server, [str(qwen), "-p", QUESTION, "--system-prompt", SYSTEM, *trim], work, env)
    assert out.strip(), "Qwen Code printed no answer"


def test_opencode_answers_with_the_real_model(real_server, tmp_path):
    opencode = npm_client("opencode-ai", OPENCODE_VERSION, "opencode")
    work, home = folders(tmp_path)
    # An agent of its own: a one-line prompt and no tools, instead of OpenCode's long default.
    agent = {"ask": {"mode": "primary", "prompt": SYSTEM, "tools": {"*": False}}}
    env = opencode_setup(work, home, real_server.base_url, agent=agent)
    command = [str(opencode), "run", "--model", "whiz/whiz", "--agent", "ask", QUESTION]
    with cache_lock(Path(env["XDG_CACHE_HOME"])):  # its first run fills the shared cache
        out = run_turn(real_server, command, work, env)
    assert out.strip(), "OpenCode printed no answer"


def test_aider_answers_about_a_file_with_the_real_model(real_server, tmp_path):
    aider = aider_client()
    work, home = folders(tmp_path)
    (work / "hello.py").write_text("print('hi')\n")
    flags = ["--edit-format", "ask", "--yes-always", "--no-git", "--no-check-update", "--no-analytics"]
    flags += ["--no-show-model-warnings", "--map-tokens", "0"]
    flags += ["--openai-api-base", real_server.base_url, "--openai-api-key", "unused"]
    question = "What does hello.py print? Answer in one sentence."
    command = [str(aider), "--model", "openai/whiz", *flags, "--message", question, "hello.py"]
    out = run_turn(real_server, command, work, {"HOME": str(home)})
    # Aider prints what the reply cost; a turn that came back empty has no such line.
    assert "Tokens:" in out and "received" in out, out[-2000:]
