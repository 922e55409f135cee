"""Agents that speak OpenAI's Chat Completions against whiz: Qwen Code and OpenCode. The model asks
to write a file with the client's own tool, the client writes it, and the turn ends."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import cache_lock, client_engine, folders, npm_client

QWEN_CODE_VERSION = "0.24.4"
OPENCODE_VERSION = "1.18.33"
CONTENT = "print('hello')\n"


def write_then_answer(tool: str, path_arg: str, path: Path):
    """A model that calls the client's write tool once, then says what it did."""

    def script(conversation: str) -> str:
        if "<tool_response>" in conversation.rsplit("<|im_start|>user", 1)[-1]:
            return "I wrote hello.py."
        call = {"name": tool, "arguments": {path_arg: str(path), "content": CONTENT}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"

    return script


def serve(serve_fake, script):
    return serve_fake(script=script, engine_kw=client_engine())


def qwen_code_env(home: Path, base_url: str) -> dict[str, str]:
    """Qwen Code pointed at whiz as docs/clients.md says, with a fresh profile in `home`."""
    return {
        "HOME": str(home),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "unused",
        "OPENAI_MODEL": "whiz",
    }


def test_qwen_code_writes_a_file_through_whiz(serve_fake, tmp_path):
    qwen = npm_client("@qwen-code/qwen-code", QWEN_CODE_VERSION, "qwen")
    work, home = folders(tmp_path)
    served = serve(serve_fake, write_then_answer("write_file", "file_path", work / "hello.py"))
    env = {**os.environ, **qwen_code_env(home, served.base_url)}
    done = subprocess.run(
        [str(qwen), "-p", "Write hello.py that prints hello", "--yolo"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (work / "hello.py").read_text() == CONTENT
    assert "I wrote hello.py." in done.stdout


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
    # The provider package OpenCode installs on first use is kept with the client, not per test;
    # OpenCode takes its project folder from PWD, not from the working directory it runs in.
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "whiz" / "opencode-cache"
    return {"HOME": str(home), "PWD": str(work), "XDG_CACHE_HOME": str(cache)}


def test_opencode_writes_a_file_through_whiz(serve_fake, tmp_path):
    opencode = npm_client("opencode-ai", OPENCODE_VERSION, "opencode")
    work, home = folders(tmp_path)
    served = serve(serve_fake, write_then_answer("write", "filePath", work / "hello.py"))
    env = {**os.environ, **opencode_setup(work, home, served.base_url)}
    with cache_lock(Path(env["XDG_CACHE_HOME"])):  # its first run fills the shared cache
        done = subprocess.run(
            [str(opencode), "run", "--model", "whiz/whiz", "Write hello.py that prints hello"],
            cwd=work, env=env, capture_output=True, text=True,
            timeout=300,
            check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (work / "hello.py").read_text() == CONTENT
    assert "I wrote hello.py." in done.stdout


AIDER_VERSION = "0.86.2"


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


def test_aider_applies_an_edit_through_whiz(serve_fake, tmp_path):
    aider = aider_client()
    work, home = folders(tmp_path)
    (work / "hello.py").write_text("print('hi')\n")
    reply = (
        "hello.py\n```python\n<<<<<<< SEARCH\nprint('hi')\n=======\nprint('hello')\n>>>>>>> REPLACE\n```\n"
    )
    served = serve(serve_fake, lambda conversation: reply)
    flags = ["--edit-format", "diff", "--yes-always", "--no-git", "--no-check-update", "--no-analytics"]
    flags += ["--no-show-model-warnings", "--openai-api-base", served.base_url, "--openai-api-key", "unused"]
    done = subprocess.run(
        [str(aider), "--model", "openai/whiz", *flags, "--message", "Make hello.py print hello", "hello.py"],
        cwd=work, env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (work / "hello.py").read_text() == CONTENT
    assert "Applied edit to hello.py" in done.stdout
