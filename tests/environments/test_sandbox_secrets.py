"""The workspace's own secret files (`.env`, keys, credentials) are hidden from confined commands,
with the real bubblewrap: whatever a command reads there, it can hand to the model in any encoding,
past the masking of its output. Also as `nobody`, where the tests run as root."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.environments.test_sandbox_escapes import NOBODY, ROOT, _python_for_nobody
from whiz.environments import SandboxMode, SandboxOptions, environment_for
from whiz.environments.sandbox import Bubblewrap, _checked_bubblewrap
from whiz.environments.secret_paths import MAX_HIDDEN
from whiz.environments.secret_rules import SecretFiles

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SECRET = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
OPTIONS = SandboxOptions(secret_files=SecretFiles(("config/prod.yaml",)))
"""The user's own kind of secret file (`--secret-file config/prod.yaml`)."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return seeded(tmp_path / "ws")


def seeded(root: Path) -> Path:
    """A project with secrets where they hide in practice: `.env`, one in a sub-folder six levels
    down, a key, a folder of them, the user's own kind, a symlink and a hard link to one."""
    deep = root / "services" / "api" / "deploy" / "stage" / "eu" / "one"
    deep.mkdir(parents=True)
    (root / "app.py").write_text("print('app')\n")
    (root / ".env").write_text(f"STRIPE_KEY={SECRET}\n")
    (root / ".env.example").write_text("STRIPE_KEY=sk_test_example\n")
    (deep / ".env").write_text(f"TOKEN={SECRET}-deep\n")
    (root / "server.key").write_text(f"{SECRET}-key\n")
    (root / ".aws").mkdir()
    (root / ".aws" / "credentials").write_text(f"aws_secret_access_key={SECRET}-aws\n")
    (root / "config").mkdir()
    (root / "config" / "prod.yaml").write_text(f"password: {SECRET}-prod\n")
    (root / "settings").symlink_to(".env")
    (root / "notes.txt").hardlink_to(root / ".env")
    return root


def run(ws: Path, command: str, options: SandboxOptions | None = None, **kw) -> str:
    env = environment_for(
        ws, options or SandboxOptions(secret_files=SecretFiles(("config/prod.yaml",))), **kw
    )
    return asyncio.run(env.run(command)).output


READ_ALL = (
    "cat .env settings notes.txt server.key .aws/credentials config/prod.yaml"
    " services/api/deploy/stage/eu/one/.env; ls -A .aws; cat .env.example app.py"
)


@pytest.mark.parametrize("mode", [SandboxMode.WORKSPACE_WRITE, SandboxMode.READ_ONLY])
def test_a_command_reads_no_secret_file_of_the_workspace(workspace: Path, mode: SandboxMode):
    options = SandboxOptions(mode=mode, secret_files=SecretFiles(("config/prod.yaml",)))
    out = run(workspace, READ_ALL, options)
    assert SECRET not in out
    assert "sk_test_example" in out and "print('app')" in out  # the rest is there to read
    assert ".aws/credentials: No such file" in out  # the folder of secrets is empty inside
    assert (workspace / ".env").read_text() == f"STRIPE_KEY={SECRET}\n"


def test_without_the_hiding_the_same_command_reads_them(workspace: Path):
    options = SandboxOptions(allow_secret_reads=True, secret_files=SecretFiles(("config/prod.yaml",)))
    out = run(workspace, READ_ALL, options)
    for suffix in ("", "-deep", "-key", "-aws", "-prod"):
        assert f"{SECRET}{suffix}\n" in out


def test_a_copy_or_a_new_link_made_inside_shows_nothing(workspace: Path):
    out = run(workspace, "cp .env copied; ln .env hard; ln -s .env soft; cat copied hard soft; mv .env gone")
    assert SECRET not in out
    assert (workspace / ".env").exists()  # a mount point cannot be moved away


def test_a_secret_file_that_appears_between_two_commands_is_hidden_from_the_second(workspace: Path):
    env = environment_for(workspace, SandboxOptions())
    assert asyncio.run(env.run("true")).ok
    (workspace / "id_ed25519").write_text(f"{SECRET}-ssh\n")
    (workspace / "web").mkdir()
    (workspace / "web" / ".env.local").write_text(f"{SECRET}-web\n")
    out = asyncio.run(env.run("cat id_ed25519 web/.env.local")).output
    assert SECRET not in out


def test_a_file_the_user_let_through_is_shown_from_the_next_command_on(workspace: Path):
    shown: set[str] = set()
    env = environment_for(workspace, SandboxOptions(), shown=shown)
    assert SECRET not in asyncio.run(env.run("cat .env")).output
    shown.add(".env")
    out = asyncio.run(env.run("cat .env; cat server.key")).output
    assert f"STRIPE_KEY={SECRET}\n" in out and f"{SECRET}-key" not in out


@pytest.mark.skipif(not ROOT, reason="run as a user, the other tests already are this one")
def test_as_an_unprivileged_user(outside: Path, monkeypatch: pytest.MonkeyPatch):
    setpriv, python = shutil.which("setpriv"), _python_for_nobody()
    if setpriv is None or python is None:
        pytest.skip("needs setpriv and a system python3")
    monkeypatch.setenv("HOME", str(outside))
    workspace = seeded(outside / "ws")
    for folder in [*workspace.rglob("*"), workspace]:
        if folder.is_dir() and not folder.is_symlink():
            folder.chmod(0o755)
    for path in workspace.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(0o644)  # readable by nobody: only the sandbox keeps them out
    workspace.chmod(0o777)  # as in the user's own project, nobody may write it
    checked = _checked_bubblewrap(workspace, SandboxOptions())
    box = Bubblewrap(checked.executable, workspace, OPTIONS, checked.filter_bpf, euid=NOBODY)
    launch = box.launch(f"id -u; {READ_ALL}; {python} -c \"print(open('.env').read())\"")
    try:
        done = subprocess.run(
            [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *launch.argv],
            cwd=workspace, capture_output=True, text=True, timeout=60, pass_fds=launch.pass_fds,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(outside)},
        )  # fmt: skip
    finally:
        launch.finish()
    out = done.stdout + done.stderr
    assert out.startswith(f"{NOBODY}\n") and "print('app')" in out, out
    assert SECRET not in out
    plain = subprocess.run(
        [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", "cat", ".env"],
        cwd=workspace, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert SECRET in plain.stdout  # nobody could read it, outside the sandbox


def test_a_link_outside_or_to_the_workspace_itself_hides_nothing_there(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text("print('app')\n")
    (ws / ".env").symlink_to(".")  # would hide the whole workspace
    (ws / "id_rsa").symlink_to("/bin")  # would hide the shell
    out = run(ws, "cat app.py; ls /bin/sh")
    assert "print('app')" in out and "/bin/sh" in out
    assert os.path.isdir(ws)


def test_a_token_in_the_git_config_is_not_shown_and_git_still_works(tmp_path: Path):
    ws = tmp_path / "clone"
    ws.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    url = f"https://x-access-token:{SECRET}@github.com/o/r.git"
    subprocess.run(["git", "remote", "add", "origin", url], cwd=ws, check=True)
    header = f"AUTHORIZATION: basic {SECRET}-header"
    subprocess.run(["git", "config", "http.https://github.com/.extraheader", header], cwd=ws, check=True)
    before = set(Path(tempfile.gettempdir()).glob("whiz-git-config-*"))
    out = run(ws, "cat .git/config; git remote -v; git status --short")
    assert SECRET not in out
    assert "https://github.com/o/r.git" in out and "fatal" not in out
    assert SECRET in (ws / ".git" / "config").read_text()  # the file itself is as it was
    assert set(Path(tempfile.gettempdir()).glob("whiz-git-config-*")) == before  # the copy is gone


def test_in_a_sub_folder_of_a_repository_its_other_secret_files_are_hidden_too(outside: Path):
    repo = outside / "mono"  # outside /tmp, whose private copy would hide the parent anyway
    (repo / "backend").mkdir(parents=True)
    (repo / "billing").mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / ".env").write_text(f"TOP={SECRET}-top\n")
    (repo / "billing" / ".env").write_text(f"SIBLING={SECRET}-sibling\n")
    (repo / "backend" / ".env").write_text(f"OWN={SECRET}-own\n")
    (repo / "README.md").write_text("the monorepo\n")
    shown: set[str] = set()
    env = environment_for(repo / "backend", SandboxOptions(), shown=shown)
    out = asyncio.run(env.run("cat ../.env ../billing/.env .env ../README.md")).output
    assert SECRET not in out and "the monorepo" in out
    shown.add(".env")  # the workspace's own, named by the user
    out = asyncio.run(env.run("cat ../.env .env")).output
    assert f"{SECRET}-own" in out and f"{SECRET}-top" not in out


def test_a_workspace_called_secrets_in_a_repository_is_judged_as_the_agent_judges_it(outside: Path):
    ws = outside / "infra" / "secrets"
    ws.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=outside / "infra", check=True)
    (ws / "Makefile").write_text("all:\n\techo built\n")  # the model may read it: so may commands
    (ws / ".env").write_text(f"KEY={SECRET}\n")
    out = run(ws, "cat Makefile .env; ls")
    assert "echo built" in out and SECRET not in out


def test_a_command_the_sandbox_cannot_hold_does_not_run_and_says_why(workspace: Path):
    env = environment_for(workspace, OPTIONS)
    for i in range(MAX_HIDDEN + 5):
        (workspace / f"k{i}.key").write_text(f"{SECRET}\n")
    result = asyncio.run(env.run("echo ran; cat k1.key"))
    assert not result.ok and "too many to hide" in result.output and "ran" not in result.output
