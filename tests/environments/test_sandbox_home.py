"""Deny by default: a confined command sees none of the home folders but the toolchains in them and
what the user allowed by name, as root and as an ordinary user; builds and tests still run."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import pwd
import shutil
import subprocess
import sys
import textwrap
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from whiz.config_file import ConfigFile
from whiz.environments import SandboxMode, SandboxOptions, environment_for
from whiz.environments.home import SandboxConfigError, allowed_in, covered_homes, home_view
from whiz.environments.sandbox import sandbox_summary

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

ROOT = os.geteuid() == 0
TOKEN = "ghp_" + "x7Qm2Lr9Vt4Kp8Zs1Wd6Yb3Nc5Hf0Ja"
USER = "whiztest"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("a = 1\n")
    return root


@pytest.fixture
def tool_config(home: Path) -> Path:
    """A token in a tool's folder no list of secret stores knows."""
    folder = home / ".config" / "sometool"
    folder.mkdir(parents=True)
    (folder / "hosts.yml").write_text(f"token: {TOKEN}\n")
    (home / "notes.txt").write_text("plain-notes\n")
    return folder


def run(ws: Path, command: str, options: SandboxOptions | None = None) -> str:
    return asyncio.run(environment_for(ws, options).run(command)).output


@pytest.mark.parametrize(
    "options",
    [SandboxOptions(), SandboxOptions(mode=SandboxMode.READ_ONLY), SandboxOptions(network=True)],
    ids=["workspace-write", "read-only", "network"],
)
def test_an_unknown_file_in_the_home_is_unreadable(
    workspace: Path, home: Path, tool_config: Path, options: SandboxOptions
):
    out = run(
        workspace,
        f"cat {tool_config}/hosts.yml ~/notes.txt 2>&1; ls -A ~ ~/.config 2>/dev/null; cat a.py",
        options,
    )
    assert TOKEN not in out and "plain-notes" not in out and "notes.txt: No such file" in out
    assert "sometool" not in out.split("No such file or directory")[-1]  # nor listed
    assert "a = 1" in out  # the workspace is there


def test_a_link_planted_in_the_workspace_reaches_nothing_in_the_home(
    workspace: Path, home: Path, tool_config: Path
):
    (workspace / "shipped").symlink_to(tool_config)  # by the repository, before any command
    env = environment_for(workspace)
    asyncio.run(env.run(f"ln -s {home} planted-home; ln -s {tool_config}/hosts.yml planted-file"))
    assert (workspace / "planted-home").is_symlink()  # planted for real, in the workspace
    out = asyncio.run(
        env.run("cat shipped/hosts.yml planted-file planted-home/notes.txt; ls -A planted-home")
    ).output
    assert TOKEN not in out and "plain-notes" not in out


def test_a_dependency_folder_linked_into_the_home_shows_only_an_environment(
    workspace: Path, home: Path, tool_config: Path
):
    # Isolated copies link the real `.venv` (often under ~/.virtualenvs): that one is mounted. A
    # `node_modules` link a repository ships to a tool's folder is not.
    venv = home / ".virtualenvs" / "app"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "marker").write_text("venv-marker\n")
    (workspace / ".venv").symlink_to(venv)
    (workspace / "node_modules").symlink_to(tool_config)
    out = run(workspace, "cat .venv/bin/marker node_modules/hosts.yml")
    assert "venv-marker" in out and TOKEN not in out


@pytest.mark.skipif(not ROOT, reason="root's own home and another user's: needs root")
def test_root_home_and_another_user_home_are_unreadable(workspace: Path, home: Path, ordinary_user):
    # HOME points elsewhere (as in CI): root's own home is hidden all the same.
    mine = Path(pwd.getpwuid(0).pw_dir) / f"whiz-probe-{uuid.uuid4().hex}"
    theirs = Path(ordinary_user.pw_dir) / f"whiz-probe-{uuid.uuid4().hex}"
    try:
        for path, text in ((mine, "root-notes"), (theirs, "their-notes")):
            path.write_text(text)
            path.chmod(0o644)
        out = run(workspace, f"cat {mine} {theirs} 2>/dev/null; ls -A /home /root; echo end")
    finally:
        mine.unlink(missing_ok=True)
        theirs.unlink(missing_ok=True)
    assert "root-notes" not in out and "their-notes" not in out and USER not in out
    assert "end" in out


def test_what_the_user_allows_by_name_is_read_only_and_its_secret_stores_stay_hidden(
    workspace: Path, home: Path, tool_config: Path
):
    gh = home / ".config" / "gh"
    gh.mkdir()
    (gh / "hosts.yml").write_text("gh-token-value\n")
    allowed = SandboxOptions(allow=(Path("~/.config"),))
    out = run(workspace, f"cat {tool_config}/hosts.yml {gh}/hosts.yml; echo x > {tool_config}/new", allowed)
    assert TOKEN in out and "gh-token-value" not in out
    assert "Read-only file system" in out and not (tool_config / "new").exists()
    assert "plain-notes" not in run(workspace, "cat ~/notes.txt", allowed)  # only what was named


def test_toolchains_in_the_home_are_found_read_only(
    workspace: Path, home: Path, monkeypatch: pytest.MonkeyPatch
):
    tools = home / ".cargo" / "bin"
    tools.mkdir(parents=True)
    (tools / "whiz-tool").write_text("#!/bin/sh\necho tool-ran\n")
    (tools / "whiz-tool").chmod(0o755)
    (home / ".cargo" / "credentials.toml").write_text("token = 'cargo-token'\n")
    cache = home / ".cache" / "pip"
    cache.mkdir(parents=True)
    (cache / "entry").write_text("cached\n")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    out = run(
        workspace,
        f"whiz-tool; cat {cache}/entry {home}/.cargo/credentials.toml; echo x > {tools}/planted;"
        " echo scratch > ~/scratch && cat ~/scratch",
    )
    assert "tool-ran" in out and "cached" in out and "cargo-token" not in out
    assert not (tools / "planted").exists() and "Read-only file system" in out
    # The home inside is writable scratch, gone with the command.
    assert "scratch" in out and not (home / "scratch").exists()


def test_whiz_sandbox_says_what_the_home_shows(workspace: Path, home: Path, tool_config: Path):
    (home / ".rustup").mkdir()
    lines = sandbox_summary(workspace, SandboxOptions(allow=(tool_config, home / "nothing-here")))
    text = "\n".join(lines)
    assert "hidden (empty inside): " in text and str(home) in lines[0]
    assert str(home / ".rustup") in lines[1]
    assert str(tool_config) in lines[2]
    assert str(home / "nothing-here") in lines[3]


def test_the_config_file_allows_paths_and_names_its_mistakes(tmp_path: Path):
    config = tmp_path / "config.toml"
    assert allowed_in(ConfigFile.read(config)) == ()  # no file: nothing allowed
    config.write_text('[sandbox]\nallow = ["~/.config/tool", "/opt/x"]\n[mcp_servers.a]\ncommand = "x"\n')
    assert allowed_in(ConfigFile.read(config)) == ("~/.config/tool", "/opt/x")
    config.write_text('[sandbox]\nallows = ["~/.config/tool"]\n')
    with pytest.raises(SandboxConfigError, match="unknown key 'allows'.*did you mean 'allow'"):
        allowed_in(ConfigFile.read(config))
    config.write_text('[sandbox]\nallow = "~/.config/tool"\n')
    with pytest.raises(SandboxConfigError, match="allow must be a list of paths"):
        allowed_in(ConfigFile.read(config))


def test_every_login_user_home_is_covered_but_never_a_system_folder(tmp_path: Path):
    def account(name: str, uid: int, home: Path | str) -> pwd.struct_passwd:
        return pwd.struct_passwd((name, "x", uid, uid, "", str(home), "/bin/sh"))

    elsewhere = tmp_path / "srv-alice"
    elsewhere.mkdir()
    accounts = [
        account("alice", 1001, elsewhere),
        account("www-data", 33, "/var/www"),
        account("odd", 1002, "/var"),
        account("nobody", 65534, "/"),
    ]
    covered = covered_homes({"HOME": "/"}, 1001, accounts)
    assert elsewhere.resolve() in covered and Path("/root") in covered
    assert not any(Path(s).is_relative_to(c) for c in covered for s in ("/var", "/usr", "/bin", "/tmp"))


def test_the_base_python_of_a_workspace_venv_is_found_only_when_it_is_one(tmp_path: Path, home: Path):
    python = home / "opt" / "py312"
    (python / "bin").mkdir(parents=True)
    (python / "bin" / "python3.12").write_text("")
    (python / "lib" / "python3.12").mkdir(parents=True)
    secret = home / ".config" / "tool" / "bin"
    secret.mkdir(parents=True)
    for name, target in (("good", python / "bin"), ("bad", secret)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "pyvenv.cfg").write_text(f"home = {target}\n")
    view = home_view(os.environ, os.geteuid(), workspace_envs=[tmp_path / "good", tmp_path / "bad"])
    assert python in view.toolchains and not any(t.is_relative_to(home / ".config") for t in view.toolchains)


# Real builds and tests inside, with the machine's own toolchains (wherever HOME is) -------------


@pytest.fixture
def home_probe() -> Iterator[Path]:
    """A file in the real home: hidden while the toolchains there work."""
    path = Path.home() / f"whiz-probe-{uuid.uuid4().hex}"
    path.write_text("home-probe\n")
    yield path
    path.unlink(missing_ok=True)


def _wheel(folder: Path) -> Path:
    files = {
        "whizprobe/__init__.py": "VALUE = 42\n",
        "whizprobe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: whizprobe\nVersion: 1.0\n",
        "whizprobe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files["whizprobe-1.0.dist-info/RECORD"] = "\n".join([*record, "whizprobe-1.0.dist-info/RECORD,,"]) + "\n"
    wheel = folder / "whizprobe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return wheel


def test_pip_install_and_pytest_run_inside(workspace: Path, home_probe: Path):
    wheel = _wheel(workspace)
    (workspace / "test_probe.py").write_text(
        "import whizprobe\n\ndef test_value():\n    assert whizprobe.VALUE == 42\n"
    )
    python = sys.executable
    out = run(
        workspace,
        f"{python} -m pip install -q --disable-pip-version-check --no-index --target lib {wheel.name}"
        f" && PYTHONPATH=lib {python} -m pytest -q -p no:cacheprovider test_probe.py; cat {home_probe}",
    )
    assert (workspace / "lib" / "whizprobe" / "__init__.py").exists(), out
    assert "1 passed" in out and "home-probe" not in out


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_npm_test_runs_inside(workspace: Path, home_probe: Path):
    (workspace / "package.json").write_text(
        '{"name": "probe", "version": "1.0.0", "scripts": {"test": "node t.js"}}'
    )
    (workspace / "t.js").write_text("require('assert').strictEqual(6 * 7, 42); console.log('npm-test-ok');\n")
    out = run(workspace, f"npm test; cat {home_probe}")
    assert "npm-test-ok" in out and "home-probe" not in out


def _cargo_runs() -> bool:
    # rustup's cargo finds its toolchain through HOME: with HOME elsewhere it runs nowhere.
    cargo = shutil.which("cargo")
    return cargo is not None and subprocess.run([cargo, "--version"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _cargo_runs(), reason="cargo is not installed, or does not run here")
def test_cargo_test_runs_inside(workspace: Path, home_probe: Path):
    (workspace / "Cargo.toml").write_text('[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\n')
    (workspace / "src").mkdir()
    (workspace / "src" / "lib.rs").write_text("#[test]\nfn adds() { assert_eq!(6 * 7, 42); }\n")
    out = run(workspace, f"cargo test --offline -q 2>&1; cat {home_probe}")
    assert "test result: ok. 1 passed" in out and "home-probe" not in out, out


# As an ordinary user, running whiz itself -----------------------------------------------------


@pytest.fixture(scope="module")
def ordinary_user() -> pwd.struct_passwd:
    """A login user with a home in /home (made once per machine, if missing)."""
    if not ROOT:
        pytest.skip("making a user needs root")
    if shutil.which("useradd") is None or shutil.which("runuser") is None:
        pytest.skip("needs useradd and runuser")
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "-m", USER], check=True, capture_output=True)
    return pwd.getpwnam(USER)


SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from whiz.environments import environment_for

    async def main():
        env = environment_for(Path(sys.argv[1]))
        await env.run(sys.argv[2])
        print((await env.run(sys.argv[3])).output)

    asyncio.run(main())
    """
)


def test_as_an_ordinary_user_the_home_and_other_homes_are_unreadable(ordinary_user, outside: Path):
    import platformdirs

    python = "/usr/bin/python3"
    src = Path(__file__).resolve().parents[2] / "src"
    modules = outside / "modules"  # whiz needs platformdirs; nothing else of the venv
    modules.mkdir()
    (modules / "platformdirs").symlink_to(Path(platformdirs.__file__).parent)
    as_user = ["runuser", "-u", USER, "--", "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin"]
    as_user.append(f"HOME={ordinary_user.pw_dir}")
    reach = subprocess.run([*as_user, python, "-c", "import sys"], capture_output=True)
    readable = subprocess.run(
        [*as_user, "test", "-r", str(src / "whiz" / "__init__.py")], capture_output=True
    )
    if reach.returncode != 0 or readable.returncode != 0:
        pytest.skip(f"{USER} cannot run {python} or read {src}")
    home = Path(ordinary_user.pw_dir)
    tag = uuid.uuid4().hex
    tool = home / ".config" / f"sometool-{tag}"
    ws = home / f"ws-{tag}"
    other = Path("/home") / f"whiz-other-{tag}"  # another home under /home, readable by anyone
    try:
        tool.mkdir(parents=True)
        (tool / "hosts.yml").write_text(f"token: {TOKEN}\n")
        ws.mkdir()
        (ws / "shipped").symlink_to(tool)
        other.mkdir()
        (other / "notes.txt").write_text("other-notes\n")
        other.chmod(0o755)
        (other / "notes.txt").chmod(0o644)
        cache = home / ".cache" / "pip"  # a toolchain's folder in the user's own home: shown
        cache.mkdir(parents=True, exist_ok=True)
        (cache / f"entry-{tag}").write_text("cached-entry\n")
        for path in (tool.parent, tool, tool / "hosts.yml", ws, ws / "shipped", cache.parent, cache):
            os.lchown(path, ordinary_user.pw_uid, ordinary_user.pw_gid)
        outside = subprocess.run(
            [*as_user, "cat", str(tool / "hosts.yml"), str(other / "notes.txt")],
            capture_output=True,
            text=True,
        )
        assert TOKEN in outside.stdout and "other-notes" in outside.stdout  # only the sandbox stops it
        plant = "ln -s ~/.config planted"
        reads = f"~/.config/sometool-{tag}/hosts.yml shipped/hosts.yml planted/sometool-{tag}/hosts.yml"
        read = (
            f"id -u; cat {reads} {other}/notes.txt 2>/dev/null; ls -A /home /root; cat {cache}/entry-{tag};"
            " python3 -c 'print(6 * 7)'; echo made > ok.txt"
        )
        done = subprocess.run(
            [*as_user, f"PYTHONPATH={src}:{modules}", python, "-c", SCRIPT, str(ws), plant, read],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        out = done.stdout + done.stderr
        assert done.returncode == 0 and (ws / "ok.txt").exists(), out
        assert out.startswith(f"{ordinary_user.pw_uid}\n") and "42" in out and "cached-entry" in out
        assert TOKEN not in out and "other-notes" not in out and f"whiz-other-{tag}" not in out
        assert (ws / "planted").is_symlink()  # the link was made, and led nowhere
    finally:
        shutil.rmtree(tool, ignore_errors=True)
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)
        (home / ".cache" / "pip" / f"entry-{tag}").unlink(missing_ok=True)


def test_git_works_in_a_worktree_of_a_repository_in_the_home_and_a_forged_git_file_shows_nothing(
    tmp_path: Path, home: Path, tool_config: Path
):
    repo = home / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "a.py").write_text("a = 1\n")
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "first commit"], cwd=repo, check=True)
    worktree = tmp_path / "wt"
    subprocess.run([*git, "worktree", "add", "-q", str(worktree)], cwd=repo, check=True)
    assert "first commit" in run(worktree, "git log --oneline")
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / ".git").write_text(f"gitdir: {tool_config}\n")  # as a hostile repository ships it
    assert TOKEN not in run(forged, f"cat {tool_config}/hosts.yml")
