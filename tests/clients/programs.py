"""The client programs of the matrix: their pinned versions, how each is installed, pointed at whiz
by hand (as docs/clients.md says) and given a fake model's script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import cache_lock

CLAUDE_CODE_VERSION = "2.1.330"
CODEX_VERSION = "0.169.0"
QWEN_CODE_VERSION = "0.24.4"
OPENCODE_VERSION = "1.18.33"
AIDER_VERSION = "0.86.2"
CONTENT = "print('hello')\n"
ANSWER = "I wrote hello.py."


def write_then_answer(tool: str, path_arg: str, path: Path):
    """A model that calls the client's write tool once, then says what it did (`ANSWER`)."""

    def script(conversation: str) -> str:
        if "<tool_response>" in conversation.rsplit("<|im_start|>user", 1)[-1]:
            return ANSWER
        call = {"name": tool, "arguments": {path_arg: str(path), "content": CONTENT}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"

    return script


def qwen_code_env(home: Path, base_url: str) -> dict[str, str]:
    """Qwen Code pointed at whiz as docs/clients.md says, with a fresh profile in `home`."""
    return {
        "HOME": str(home),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "unused",
        "OPENAI_MODEL": "whiz",
    }


def opencode_cache() -> Path:
    """The provider package OpenCode installs on first use, kept with the client, not per test."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "whiz" / "opencode-cache"


def opencode_setup(work: Path, home: Path, base_url: str, **more: object) -> dict[str, str]:
    """OpenCode pointed at whiz as docs/clients.md says (`more`: other keys of opencode.json); returns
    the environment it runs in."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "whiz": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "whiz",
                "options": {"baseURL": base_url, "apiKey": "unused"},
                "models": {"whiz": {"name": "whiz"}},
            }
        },
        **more,
    }
    (work / "opencode.json").write_text(json.dumps(config))
    # OpenCode takes its project folder from PWD, not from the working directory it runs in.
    return {"HOME": str(home), "PWD": str(work), "XDG_CACHE_HOME": str(opencode_cache())}


def aider_client() -> Path:
    """Aider from PyPI, in a virtual environment of its own in the whiz cache (installed once: its
    dependencies would not fit beside whiz's)."""
    venv = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "whiz" / f"aider-{AIDER_VERSION}"
    binary = venv / "bin" / "aider"
    if shutil.which("python3") is None and not binary.exists():
        pytest.skip("no python3 to make Aider's environment with")
    with cache_lock(venv):
        if not binary.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
            done = subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", f"aider-chat=={AIDER_VERSION}"],
                capture_output=True, text=True, timeout=1200, check=False,
            )  # fmt: skip
            if done.returncode != 0 or not binary.exists():
                pytest.skip(f"could not install aider-chat=={AIDER_VERSION}: {done.stderr.strip()[-300:]}")
    return binary
