"""The ways out of the box a hostile model or repository tried, each with the real bubblewrap: root's
capabilities, host unix sockets, secret stores, a planted `.git`, a planted `.pth`, shared IPC.

CI runs as root, so most of these run there as root; `test_as_an_unprivileged_user` repeats the
checks as `nobody` (through setpriv) when the tests run as root, and as the user otherwise.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from whiz.environments import SandboxMode, SandboxOptions, SandboxUnavailable, environment_for, run_confined
from whiz.environments.sandbox import Bubblewrap, _checked_bubblewrap

# Without bubblewrap these would only show the refusal test_sandbox.py already checks.
pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (make sandbox)"
)

READ_ONLY = SandboxOptions(mode=SandboxMode.READ_ONLY)
ENV_WRITES = SandboxOptions(allow_env_writes=True)
NOBODY = 65534
ROOT = os.geteuid() == 0


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "a.py").write_text("a = 1\n")
    return root


class UnixServer:
    """A unix socket server outside the sandbox that records whatever reaches it."""

    def __init__(self, path: Path, kind: int = socket.SOCK_STREAM):
        self.path = path
        self.received: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX, kind)
        self.sock.bind(str(path))
        path.chmod(0o777)
        self.sock.settimeout(0.2)
        if kind == socket.SOCK_STREAM:
            self.sock.listen()
        self.stream = kind == socket.SOCK_STREAM
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.running:
            try:
                if self.stream:
                    conn, _ = self.sock.accept()
                    with conn:
                        conn.settimeout(1)
                        self.received.append(b"connected:" + conn.recv(100))
                else:
                    self.received.append(self.sock.recv(100))
            except OSError:
                continue

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()


@pytest.fixture
def unix_server(home: Path) -> Iterator[UnixServer]:
    server = UnixServer(home / "bus.sock")
    yield server
    server.close()


def connect_to(path: Path) -> str:
    """A confined command that connects to the stream socket at `path` and sends to it."""
    code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r}); s.send(b'run-this')"
    return f'python3 -c "{code}"'


def capabilities(output: str) -> dict[str, int]:
    return {
        line.split(":")[0]: int(line.split(":")[1], 16)
        for line in output.splitlines()
        if line.startswith("Cap") and ":" in line
    }


ROOT_ESCAPES = (
    "grep Cap /proc/self/status; id -u; "
    "mount -o remount,rw,bind / && echo REMOUNTED; "
    "unshare -r -m sh -c 'mount -o remount,rw,bind / && echo REMOUNTED'; "
    "echo planted > {target} || true"
)


async def test_as_root_the_command_holds_no_capabilities_and_cannot_remount(workspace: Path, outside: Path):
    target = outside / "victim"
    target.write_text("before\n")
    result = await environment_for(workspace).run(ROOT_ESCAPES.format(target=target))
    caps = capabilities(result.output)
    assert caps and caps["CapEff"] == 0 and caps["CapPrm"] == 0 and caps["CapBnd"] == 0, result.output
    assert "REMOUNTED" not in result.output
    assert target.read_text() == "before\n"
    if ROOT:
        assert f"\n{NOBODY}\n" in result.output  # not uid 0 inside


def test_whiz_sandbox_as_root_shows_no_effective_capabilities(workspace: Path):
    done = run_confined(workspace, ["sh", "-c", "id; grep Cap /proc/self/status"], timeout_s=30)
    assert done is not None and done.returncode == 0
    assert capabilities(done.stdout.decode())["CapEff"] == 0
    assert b"uid=0(" not in done.stdout


async def test_a_unix_socket_server_in_the_home_folder_is_out_of_reach(
    workspace: Path, unix_server: UnixServer
):
    result = await environment_for(workspace).run(connect_to(unix_server.path))
    assert not result.ok
    # Not a permission: the same command, unconfined, reaches it.
    free = await environment_for(workspace, SandboxOptions(mode=SandboxMode.DANGER_FULL_ACCESS)).run(
        connect_to(unix_server.path)
    )
    assert free.ok, free.output
    # The server's thread records the bytes after the client has gone: wait for it (a hang guard).
    for _ in range(100):
        if unix_server.received:
            break
        await asyncio.sleep(0.05)
    assert unix_server.received == [b"connected:run-this"]


async def test_a_datagram_socket_cannot_send_to_a_host_socket_either(workspace: Path, home: Path):
    server = UnixServer(home / "log.sock", socket.SOCK_DGRAM)
    try:
        code = (
            "import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); "
            f"a.sendto(b'run-this', {str(server.path)!r})"
        )
        for options in (SandboxOptions(), SandboxOptions(network=True)):
            result = await environment_for(workspace, options).run(f'python3 -c "{code}"')
            assert not result.ok
    finally:
        server.close()
    assert server.received == []


async def test_the_host_runtime_folders_are_hidden(
    workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
):
    runtime = outside / "runtime"
    runtime.mkdir()
    (runtime / "agent-marker").write_text("x")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    marker = None
    if ROOT and Path("/run").is_dir():
        marker = Path("/run") / f"whiz-box-{uuid.uuid4().hex}"
        marker.write_text("x")
    try:
        result = await environment_for(workspace).run(f"ls -A /run {runtime}; ls -A /var/run")
    finally:
        if marker is not None:
            marker.unlink()
    assert "agent-marker" not in result.output
    assert marker is None or marker.name not in result.output


async def test_secret_stores_in_the_home_folder_are_not_readable(workspace: Path, home: Path):
    # The whole home is hidden (test_sandbox_home.py); each store is hidden on its own as well,
    # inside a folder the user allowed.
    stores = {
        ".ssh/id_ed25519": "secret-ssh-key",
        ".aws/credentials": "secret-aws",
        ".config/gh/hosts.yml": "secret-gh-token",
        ".netrc": "secret-netrc",
        ".git-credentials": "secret-git-credentials",
        ".docker/config.json": "secret-docker",
        ".kube/config": "secret-kube",
        ".npmrc": "secret-npm",
        ".pypirc": "secret-pypi",
        ".gnupg/private-keys-v1.d/key": "secret-gpg",
    }
    for name, text in stores.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    (home / "notes.txt").write_text("plain-notes")
    (home / ".ssh" / "id_ed25519").chmod(0o644)  # readable: only the sandbox keeps it out
    reads = "; ".join(f"cat {home / name}" for name in stores)
    allowed = SandboxOptions(allow=(home,))
    for options in (SandboxOptions(), READ_ONLY, SandboxOptions(network=True), allowed):
        result = await environment_for(workspace, options).run(
            f"{reads}; cat {home}/notes.txt; ls -A {home}/.ssh"
        )
        assert "secret-" not in result.output, result.output
        assert ("plain-notes" in result.output) == (options is allowed)
    assert all((home / name).read_text() == text for name, text in stores.items())


@pytest.mark.skipif(not (ROOT and os.path.isfile("/etc/shadow")), reason="needs root and /etc/shadow")
async def test_as_root_the_system_password_hashes_are_hidden(workspace: Path):
    # Root's command is still root's user outside its namespace: without capabilities, but the
    # owner of /etc/shadow.
    result = await environment_for(workspace).run("cat /etc/shadow; echo end")
    assert "root:" not in result.output and "end" in result.output


async def test_whiz_own_sessions_are_not_readable(
    workspace: Path, home: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
):
    default = home / ".local" / "share" / "whiz"
    chosen = outside / "whiz-home"
    for folder in (default, chosen):
        (folder / "journal").mkdir(parents=True)
        (folder / "undo" / "s1").mkdir(parents=True)
        (folder / "sessions.db").write_text("secret-session")
        (folder / "journal" / "entry").write_text("secret-journal")
        (folder / "undo" / "s1" / "env.before").write_text("secret-undo")  # a .env's text before an edit
    monkeypatch.setenv("WHIZ_HOME", str(chosen))
    reads = " ".join(f"{f}/sessions.db {f}/journal/entry {f}/undo/s1/env.before" for f in (default, chosen))
    result = await environment_for(workspace).run(f"cat {reads}; echo end")
    assert "secret-" not in result.output and "end" in result.output


async def test_a_secret_store_that_is_a_link_is_hidden_where_it_leads(
    workspace: Path, home: Path, outside: Path
):
    keys = outside / "keys"
    keys.mkdir()
    (keys / "id_rsa").write_text("secret-linked")
    (home / ".ssh").symlink_to(keys)
    result = await environment_for(workspace).run(f"cat {home}/.ssh/id_rsa {keys}/id_rsa")
    assert "secret-linked" not in result.output


async def test_a_link_planted_as_a_dependency_folder_does_not_bring_hidden_folders_back(
    workspace: Path, home: Path
):
    # A linked `.venv` is mounted read-only where it leads (isolated copies link the real one):
    # a command that links one to a hidden folder must not get it back in the next command.
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("secret-key")
    marker = None
    if ROOT and Path("/run").is_dir():
        marker = Path("/run") / f"whiz-box-{uuid.uuid4().hex}"
        marker.write_text("x")
    try:
        env = environment_for(workspace)
        await env.run(f"ln -s {home}/.ssh .venv; ln -s /run node_modules; ln -s {home} venv")
        result = await env.run(f"cat {home}/.ssh/id_rsa; ls -A /run")
    finally:
        if marker is not None:
            marker.unlink()
    assert "secret-key" not in result.output
    assert marker is None or marker.name not in result.output


@pytest.mark.parametrize("options", [SandboxOptions(), READ_ONLY], ids=["workspace-write", "read-only"])
async def test_git_init_in_a_workspace_without_git_is_refused(tmp_path: Path, options: SandboxOptions):
    plain = tmp_path / "plain"
    plain.mkdir()
    result = await environment_for(plain, options).run(
        "git init -q && git config core.fsmonitor 'touch fsmonitor-ran' && mkdir -p .git/hooks"
        " && printf '#!/bin/sh\\ntouch hook-ran\\n' > .git/hooks/post-checkout; echo done"
    )
    assert "done" in result.output
    assert not (plain / ".git").exists()  # nothing planted, and the mount point is gone again
    assert not (plain / "fsmonitor-ran").exists()


async def test_git_init_in_a_subfolder_of_a_repository_is_refused(workspace: Path):
    sub = workspace / "pkg"
    sub.mkdir()
    result = await environment_for(sub).run("git rev-parse --show-toplevel; git init -q && echo PLANTED")
    assert str(workspace) in result.output  # git inside still finds the repository above
    assert "PLANTED" not in result.output and not (sub / ".git").exists()


async def test_a_git_folder_left_by_another_running_command_stays_until_both_end(tmp_path: Path):
    plain = tmp_path / "plain"
    plain.mkdir()
    env = environment_for(plain)
    slow = asyncio.ensure_future(env.run("sleep 1.5; git init -q && echo PLANTED; ls -a"))
    await asyncio.sleep(0.7)
    quick = await env.run("true")  # ends first: must not remove the folder the slow one sits on
    assert quick.ok
    result = await slow
    assert "PLANTED" not in result.output, result.output
    assert not (plain / ".git").exists()


async def test_a_nested_repository_git_folder_is_read_only_too(workspace: Path):
    nested = workspace / "vendor" / "lib"
    nested.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=nested, check=True)
    config = (nested / ".git" / "config").read_text()
    result = await environment_for(workspace).run(
        "echo '[core] fsmonitor = touch ran' >> vendor/lib/.git/config;"
        " touch vendor/lib/.git/hooks/post-checkout; echo x > vendor/lib/code.py"
    )
    assert (nested / ".git" / "config").read_text() == config
    assert not (nested / ".git" / "hooks" / "post-checkout").exists()
    assert (nested / "code.py").exists(), result.output  # its files stay writable


def make_venv_like(workspace: Path) -> list[Path]:
    """Dependency folders where a planted file would run outside: their site-packages."""
    site = []
    for name in (".venv", "venv", "env", "web/.venv"):
        lib = workspace / name / "lib" / "python3.11" / "site-packages"
        lib.mkdir(parents=True)
        (workspace / name / "pyvenv.cfg").write_text("home = /usr/bin\n")
        site.append(lib)
    modules = workspace / "node_modules" / "left-pad"
    modules.mkdir(parents=True)
    site.append(modules)
    return site


async def test_a_pth_planted_in_the_workspace_venv_is_refused(workspace: Path):
    folders = make_venv_like(workspace)
    plant = "; ".join(f"echo 'import os' > {f}/evil.pth" for f in folders)
    result = await environment_for(workspace).run(f"{plant}; echo made > ok.txt")
    assert (workspace / "ok.txt").read_text() == "made\n"  # the rest of the workspace stays writable
    assert not any((f / "evil.pth").exists() for f in folders), result.output


async def test_whiz_own_environment_inside_the_workspace_is_read_only(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    prefix = workspace / "tools" / "whiz-env"
    prefix.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(prefix))
    result = await environment_for(workspace).run(f"echo x > {prefix}/evil.pth")
    assert not result.ok and not (prefix / "evil.pth").exists()


async def test_allow_env_writes_lets_the_command_install(workspace: Path):
    folders = make_venv_like(workspace)
    plant = " && ".join(f"echo 'import os' > {f}/mine.pth" for f in folders)
    result = await environment_for(workspace, ENV_WRITES).run(plant)
    assert result.ok, result.output
    assert all((f / "mine.pth").exists() for f in folders)
    # .git stays read-only even then.
    assert not (await environment_for(workspace, ENV_WRITES).run("touch .git/hooks/pre-commit")).ok


async def test_the_ipc_namespace_is_not_the_hosts(workspace: Path):
    result = await environment_for(workspace).run("readlink /proc/self/ns/ipc")
    assert result.ok and result.output.strip().startswith("ipc:")
    assert result.output.strip() != os.readlink("/proc/self/ns/ipc")


def test_a_bubblewrap_that_leaves_capabilities_or_no_filter_is_refused(workspace: Path):
    # A stand-in that runs its command unconfined: as root it shows capabilities, as a user no
    # seccomp filter; either way the check refuses it.
    fake = workspace.parent / "fake-bwrap"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done; shift; exec "$@"\n')
    fake.chmod(0o755)
    with pytest.raises(SandboxUnavailable, match="capabilities|system-call filter"):
        environment_for(workspace, SandboxOptions(bwrap=str(fake)))


def _python_for_nobody() -> str | None:
    for path in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(path, os.X_OK):
            return path
    return None


@pytest.mark.skipif(not ROOT, reason="run as a user, the other tests already are this one")
def test_as_an_unprivileged_user(outside: Path, monkeypatch: pytest.MonkeyPatch):
    setpriv, python = shutil.which("setpriv"), _python_for_nobody()
    if setpriv is None or python is None:
        pytest.skip("needs setpriv and a system python3")
    monkeypatch.setenv("HOME", str(outside))
    ws = outside / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    (outside / ".ssh").mkdir()
    (outside / ".ssh" / "id_rsa").write_text("secret-key")
    (outside / ".ssh" / "id_rsa").chmod(0o644)
    site = ws / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    site.chmod(0o777)  # writable by nobody: only the sandbox keeps the plant out
    server = UnixServer(outside / "bus.sock")
    checked = _checked_bubblewrap(ws, SandboxOptions())  # as root: only for the executable and filter
    box = Bubblewrap(checked.executable, ws, SandboxOptions(), checked.filter_bpf, euid=NOBODY)
    code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(server.path)!r}); s.send(b'x')"
    command = (
        "grep Cap /proc/self/status; readlink /proc/self/ns/ipc;"
        " mount -o remount,rw,bind / && echo REMOUNTED;"
        f' {python} -c "{code}" || echo SOCKET-REFUSED; cat {outside}/.ssh/id_rsa;'
        f" git init -q && echo PLANTED; echo 'import os' > {site}/evil.pth; echo made > ok.txt"
    )
    launch = box.launch(command)
    try:
        done = subprocess.run(
            [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *launch.argv],
            cwd=ws, capture_output=True, text=True, timeout=60, pass_fds=launch.pass_fds,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(outside)},
        )  # fmt: skip
    finally:
        launch.finish()
        server.close()
    out = done.stdout + done.stderr
    assert (ws / "ok.txt").exists(), out  # it ran, as nobody, in a workspace nobody may write
    assert capabilities(out)["CapEff"] == 0
    assert "REMOUNTED" not in out and "PLANTED" not in out and "secret-key" not in out
    assert "SOCKET-REFUSED" in out and server.received == []
    assert os.readlink("/proc/self/ns/ipc") not in out
    assert not (ws / ".git").exists() and not (site / "evil.pth").exists()
