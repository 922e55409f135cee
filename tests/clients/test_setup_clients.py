"""Each real client against whiz, set up as a user sets it up: with no flags and no environment of
ours, it reads the configuration `whiz setup` wrote into its fresh profile, and finishes a turn
against a whiz server over the fake engine: the model asks to write a file with the client's own
tool, the client writes it, and the turn ends with the model's answer (the model's own tool-call
format: the protocol, not the model's skill, is what is proven). The configuration written by
hand, as docs/clients.md gives it, is what `test_real_model.py` runs on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from whiz.commands.setup import run_setup
from whiz.setup.base import Where

from .conftest import cache_lock, client_engine, folders, npm_client
from .programs import (
    ANSWER,
    CLAUDE_CODE_VERSION,
    CODEX_VERSION,
    CONTENT,
    OPENCODE_VERSION,
    QWEN_CODE_VERSION,
    aider_client,
    opencode_cache,
    write_then_answer,
)
from .test_codex_cli import patch_then_answer

QUESTION = "Write hello.py that prints hello"


def set_up(client: str, home: Path, root: str, api_key: str | None = None, **env: str) -> None:
    """`whiz setup CLIENT` into a fresh HOME, for the server at `root` (no warming: the fake
    engine has no prefix cache)."""
    where = Where(home, {"HOME": str(home), **env})
    assert run_setup(client, base_url=root, api_key=api_key, warm=False, where=where) == 0


def run(command: list[str], work: Path, home: Path, **env: str) -> subprocess.CompletedProcess:
    # The client's own environment, less anything that would point it elsewhere than the config.
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "WHIZ_"))}
    return subprocess.run(
        command, cwd=work, env={**base, "HOME": str(home), **env}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


def served(serve_fake, script, **kw):
    return serve_fake(script=script, engine_kw=client_engine(), **kw)


def wrote(done: subprocess.CompletedProcess, work: Path) -> None:
    """The turn ended cleanly, the client's tool wrote the file, and it printed the model's answer."""
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (work / "hello.py").read_text() == CONTENT
    assert ANSWER in done.stdout, done.stdout[-2000:]


def test_claude_code_runs_on_the_settings_whiz_setup_wrote(serve_fake, tmp_path):
    claude = npm_client("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude")
    work, home = folders(tmp_path)
    # A server that wants a key: the settings carry it, and Claude Code sends it as `x-api-key`.
    server = served(serve_fake, write_then_answer("Write", "file_path", work / "hello.py"), api_keys=["k1"])
    set_up("claude", home, server.root, api_key="k1")
    done = run([str(claude), "-p", QUESTION, "--permission-mode", "acceptEdits"], work, home,
               DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1")  # fmt: skip
    wrote(done, work)


def test_qwen_code_runs_on_the_settings_whiz_setup_wrote(serve_fake, tmp_path):
    qwen = npm_client("@qwen-code/qwen-code", QWEN_CODE_VERSION, "qwen")
    work, home = folders(tmp_path)
    server = served(serve_fake, write_then_answer("write_file", "file_path", work / "hello.py"))
    set_up("qwen", home, server.root)
    done = run([str(qwen), "-p", QUESTION, "--yolo"], work, home)
    wrote(done, work)


def test_opencode_runs_on_the_config_whiz_setup_wrote(serve_fake, tmp_path):
    opencode = npm_client("opencode-ai", OPENCODE_VERSION, "opencode")
    work, home = folders(tmp_path)
    server = served(serve_fake, write_then_answer("write", "filePath", work / "hello.py"))
    config = home / ".config"
    set_up("opencode", home, server.root, XDG_CONFIG_HOME=str(config))
    cache = opencode_cache()
    with cache_lock(cache):  # its first run fills the shared cache
        done = run([str(opencode), "run", QUESTION], work, home, PWD=str(work), XDG_CONFIG_HOME=str(config),
                   XDG_CACHE_HOME=str(cache))  # fmt: skip
    wrote(done, work)


def test_codex_runs_on_the_config_whiz_setup_wrote(serve_fake, tmp_path):
    codex = npm_client("@openai/codex", CODEX_VERSION, "codex")
    work, home = folders(tmp_path)
    (work / "hello.py").write_text("print('hi')\n")
    server = serve_fake(script=patch_then_answer, engine_kw=client_engine(65536))
    set_up("codex", home, server.root)
    # Codex's own workspace-write sandbox cannot write on this CI machine (a container, as root).
    command = [
        str(codex),
        "exec",
        "--skip-git-repo-check",
        "-s",
        "danger-full-access",
        "Make hello.py print hello",
    ]
    done = run(command, work, home, RUST_LOG="codex_api=debug")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (work / "hello.py").read_text() == CONTENT
    assert "I changed hello.py" in done.stdout
    assert "Model metadata for" not in done.stderr  # the catalog file it wrote describes the model
    # The provider it wrote asks for the WebSocket (a turn sends only what is new).
    assert "successfully connected to Responses WebSocket" in done.stderr


def test_aider_runs_on_the_config_whiz_setup_wrote(serve_fake, tmp_path):
    aider = aider_client()
    work, home = folders(tmp_path)
    (work / "hello.py").write_text("print('hi')\n")
    reply = (
        "hello.py\n```python\n<<<<<<< SEARCH\nprint('hi')\n=======\nprint('hello')\n>>>>>>> REPLACE\n```\n"
    )
    server = served(serve_fake, lambda conversation: reply)
    set_up("aider", home, server.root)
    flags = ["--yes-always", "--no-git", "--no-check-update", "--no-analytics"]
    done = run([str(aider), *flags, "--message", "Make hello.py print hello", "hello.py"], work, home)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (work / "hello.py").read_text() == "print('hello')\n"
    assert "Applied edit to hello.py" in done.stdout
    assert "Unknown context window" not in done.stdout  # the metadata file it wrote describes the model
