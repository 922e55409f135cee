"""`whiz setup CLIENT` as the client sees it: each real client, with no flags and no environment
of ours, reads the configuration `whiz setup` wrote into its fresh profile and finishes a turn
against a whiz server over the fake engine (the model's own tool-call format: the protocol, not
the model's skill, is what is proven)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from whiz.commands.setup import run_setup
from whiz.setup.base import Where

from .conftest import client_engine, folders, npm_client
from .test_claude_code import CLAUDE_CODE_VERSION
from .test_codex_cli import CODEX_VERSION, patch_then_answer
from .test_openai_agents import OPENCODE_VERSION, QWEN_CODE_VERSION, aider_client, write_then_answer

QUESTION = "Write hello.py that prints hello"


def set_up(client: str, home: Path, root: str, **env: str) -> None:
    """`whiz setup CLIENT` into a fresh HOME, for the server at `root` (no warming: the fake
    engine has no prefix cache)."""
    where = Where(home, {"HOME": str(home), **env})
    assert run_setup(client, base_url=root, warm=False, where=where) == 0


def run(command: list[str], work: Path, home: Path, **env: str) -> subprocess.CompletedProcess:
    # The client's own environment, less anything that would point it elsewhere than the config.
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "WHIZ_"))}
    return subprocess.run(
        command, cwd=work, env={**base, "HOME": str(home), **env}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip


def served(serve_fake, script):
    return serve_fake(script=script, engine_kw=client_engine())


def test_claude_code_runs_on_the_settings_whiz_setup_wrote(serve_fake, tmp_path):
    claude = npm_client("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude")
    work, home = folders(tmp_path)
    server = served(serve_fake, write_then_answer("Write", "file_path", work / "hello.py"))
    set_up("claude", home, server.root)
    done = run([str(claude), "-p", QUESTION, "--permission-mode", "acceptEdits"], work, home,
               DISABLE_AUTOUPDATER="1")  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (work / "hello.py").read_text() == "print('hello')\n"


def test_qwen_code_runs_on_the_settings_whiz_setup_wrote(serve_fake, tmp_path):
    qwen = npm_client("@qwen-code/qwen-code", QWEN_CODE_VERSION, "qwen")
    work, home = folders(tmp_path)
    server = served(serve_fake, write_then_answer("write_file", "file_path", work / "hello.py"))
    set_up("qwen", home, server.root)
    done = run([str(qwen), "-p", QUESTION, "--yolo"], work, home)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (work / "hello.py").read_text() == "print('hello')\n"


def test_opencode_runs_on_the_config_whiz_setup_wrote(serve_fake, tmp_path):
    opencode = npm_client("opencode-ai", OPENCODE_VERSION, "opencode")
    work, home = folders(tmp_path)
    server = served(serve_fake, write_then_answer("write", "filePath", work / "hello.py"))
    config = home / ".config"
    set_up("opencode", home, server.root, XDG_CONFIG_HOME=str(config))
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "whiz" / "opencode-cache"
    done = run([str(opencode), "run", QUESTION], work, home, PWD=str(work), XDG_CONFIG_HOME=str(config),
               XDG_CACHE_HOME=str(cache))  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (work / "hello.py").read_text() == "print('hello')\n"


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
    done = run(command, work, home)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (work / "hello.py").read_text() == "print('hello')\n"
    assert "Model metadata for" not in done.stderr  # the catalog file it wrote describes the model


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
