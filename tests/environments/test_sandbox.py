"""The real sandbox (bubblewrap, no mocks): each way out is tried and fails; the work still gets done."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.web.test_workspace_heal import sleeping
from whiz.environments import (
    SandboxMode,
    SandboxOptions,
    SandboxUnavailable,
    environment_for,
    run_confined,
    run_sandboxed,
)

READ_ONLY = SandboxOptions(mode=SandboxMode.READ_ONLY)
FULL_ACCESS = SandboxOptions(mode=SandboxMode.DANGER_FULL_ACCESS)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "a.py").write_text("a = 1\n")
    return root


@pytest.fixture
def home_file() -> Iterator[Path]:
    """A file in the user's home, wherever that is (under /tmp in some CI runs)."""
    path = Path.home() / f"whiz-sandbox-test-{uuid.uuid4().hex}"
    path.write_text("before\n")
    yield path
    path.unlink(missing_ok=True)


async def test_the_workspace_and_tmpdir_are_writable_and_python_runs(workspace: Path):
    result = await environment_for(workspace).run(
        'echo made > out.txt && echo t > "$TMPDIR/scratch" && cat "$TMPDIR/scratch"'
        ' && python3 -c "print(6 * 7)"'
    )
    assert result.ok, result.output
    assert (workspace / "out.txt").read_text() == "made\n"
    assert "42" in result.output


async def test_programs_installed_under_tmp_stay_runnable_but_read_only(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A venv or tool folder made under /tmp (CI clones often live there) would be hidden by the
    # private /tmp, and the test command's `python` would be missing.
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    tool = bin_dir / "whiz-hello"
    tool.write_text("#!/bin/sh\necho hello from tmp\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = await environment_for(workspace).run(f"whiz-hello && echo x > {bin_dir}/planted")
    assert "hello from tmp" in result.output
    assert not result.ok and not (bin_dir / "planted").exists()


async def test_writes_outside_the_workspace_do_not_land(
    workspace: Path, tmp_path: Path, outside: Path, home_file: Path
):
    (outside / "victim").write_text("before\n")
    (tmp_path / "in-tmp").write_text("before\n")
    result = await environment_for(workspace).run(
        f"echo x > {outside}/victim; echo x > {outside}/new; echo x > {home_file};"
        f" echo x > {workspace.parent}/side; echo x > {tmp_path}/in-tmp"
    )
    assert (outside / "victim").read_text() == "before\n"
    assert not (outside / "new").exists()
    assert home_file.read_text() == "before\n"
    assert not (workspace.parent / "side").exists()
    assert (tmp_path / "in-tmp").read_text() == "before\n"
    # Where the real file system shows through, the write is refused (not written to a copy). The
    # home and /tmp are private copies, gone when the command ends: checked above, wherever HOME is.
    refused = [line for line in result.output.splitlines() if f"{outside}/victim" in line]
    assert refused and "Read-only file system" in refused[0], result.output


async def test_the_workspace_git_folder_is_read_only(workspace: Path):
    config = (workspace / ".git" / "config").read_text()
    result = await environment_for(workspace).run(
        "echo '[core] hooksPath = /evil' >> .git/config; touch .git/hooks/pre-commit; cat .git/HEAD"
    )
    assert (workspace / ".git" / "config").read_text() == config
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert "refs/heads" in result.output  # still readable, so git status and git diff work


async def test_the_network_is_unreachable_unless_allowed(workspace: Path):
    connected: list[bool] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.append(True)
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connect = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\""
    async with server:
        refused = await environment_for(workspace).run(connect)
        assert not refused.ok and not connected
        allowed = await environment_for(workspace, SandboxOptions(network=True)).run(connect)
        assert allowed.ok, allowed.output
        for _ in range(100):
            if connected:
                break
            await asyncio.sleep(0.02)
        assert connected


async def test_secrets_in_the_environment_are_not_passed(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_API_KEY", "hidden-value-1")
    monkeypatch.setenv("GITHUB_TOKEN", "hidden-value-2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hidden-value-3")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    result = await environment_for(workspace).run("env")
    assert result.ok
    assert "hidden-value" not in result.output
    assert "LC_ALL=C.UTF-8" in result.output and "PATH=" in result.output
    full = await environment_for(workspace, FULL_ACCESS).run("echo $FAKE_API_KEY")
    assert "hidden-value-1" in full.output


async def test_a_detached_background_process_ends_with_its_command(workspace: Path):
    command = "(setsid nohup sh -c 'sleep 1; touch late' >/dev/null 2>&1 &); echo started"
    result = await environment_for(workspace).run(command)
    assert result.ok and "started" in result.output
    # Unconfined, the same command's process outlives it: that is what the sandbox prevents.
    free = await environment_for(workspace / ".git", FULL_ACCESS).run(command)
    assert free.ok
    await asyncio.sleep(2)
    assert (workspace / ".git" / "late").exists()
    assert not (workspace / "late").exists()


async def test_a_timeout_kills_the_command_and_what_it_started(workspace: Path):
    marker = f"3600.{os.getpid()}"  # an hour: the result comes only if the command is killed
    result = await environment_for(workspace).run(f"(sleep 1.5; touch late) & sleep {marker}", timeout_s=0.5)
    assert result.timed_out and result.exit_code is None
    assert not sleeping(marker)
    await asyncio.sleep(2)
    assert not (workspace / "late").exists()


async def test_an_interrupt_kills_the_command_and_what_it_started(workspace: Path):
    task = asyncio.ensure_future(environment_for(workspace).run("(sleep 1.5; touch late) & sleep 30"))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(2)
    assert not (workspace / "late").exists()


async def test_read_only_mode_reads_but_writes_only_to_tmpdir(workspace: Path):
    result = await environment_for(workspace, READ_ONLY).run(
        'cat a.py; echo x > b.py; echo x >> a.py; echo t > "$TMPDIR/t" && echo tmp-ok'
    )
    assert "a = 1" in result.output and "tmp-ok" in result.output
    assert (workspace / "a.py").read_text() == "a = 1\n"
    assert not (workspace / "b.py").exists()


async def test_danger_full_access_writes_anywhere(workspace: Path, home_file: Path):
    result = await environment_for(workspace, FULL_ACCESS).run(f"echo after > {home_file}; echo x > .git/new")
    assert result.ok
    assert home_file.read_text() == "after\n" and (workspace / ".git" / "new").exists()


@pytest.mark.parametrize("mode", [SandboxMode.WORKSPACE_WRITE, SandboxMode.READ_ONLY])
def test_a_missing_bubblewrap_refuses_to_run(workspace: Path, mode: SandboxMode):
    with pytest.raises(SandboxUnavailable) as raised:
        environment_for(workspace, SandboxOptions(mode=mode, bwrap="/nonexistent/bwrap"))
    message = str(raised.value)
    assert "\n" not in message
    assert "install" in message and "bubblewrap" in message and "danger-full-access" in message


def test_a_bubblewrap_that_cannot_create_namespaces_refuses_with_its_reason(workspace: Path):
    broken = workspace.parent / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(
        SandboxUnavailable, match="No permissions to create new namespace.*danger-full-access"
    ):
        environment_for(workspace, SandboxOptions(bwrap=str(broken)))


async def test_danger_full_access_needs_no_bubblewrap(workspace: Path):
    env = environment_for(
        workspace, SandboxOptions(mode=SandboxMode.DANGER_FULL_ACCESS, bwrap="/nonexistent")
    )
    assert (await env.run("echo ok")).ok


async def test_run_sandboxed_streams_the_output_and_returns_the_exit_code(workspace: Path):
    out = io.BytesIO()
    code = await run_sandboxed(workspace, ["python3", "-c", "print('a  b'); raise SystemExit(3)"], out=out)
    assert code == 3 and out.getvalue() == b"a  b\n"
    assert await run_sandboxed(workspace, ["touch", ".git/x"], out=io.BytesIO()) != 0
    assert await run_sandboxed(workspace, ["sleep", "10"], timeout_s=0.3, out=io.BytesIO()) == 124


def test_run_confined_checks_code_in_the_sandbox_and_ends_it_on_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("FAKE_API_KEY", "hidden-value-2")
    secret = tmp_path.parent / f"outside-{tmp_path.name}"
    command = ["sh", "-c", f"echo hi; touch {secret}; echo $FAKE_API_KEY"]
    done = run_confined(tmp_path, command, timeout_s=30)
    assert done is not None and done.stdout.decode().split() == ["hi"] and not secret.exists()
    assert run_confined(tmp_path, ["sleep", "30"], timeout_s=0.5) is None


def test_an_editable_whiz_under_tmp_stays_visible_to_its_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Seen in a clean clone under /tmp: `--check` runs whiz's runs_check.py from the source of the
    # editable install, which the private /tmp hid ("can't open file .../runs_check.py").
    from whiz.environments import sandbox

    package = tmp_path / "src" / "whiz"
    (package / "environments").mkdir(parents=True)
    monkeypatch.setattr(sandbox, "__file__", str(package / "environments" / "sandbox.py"))
    box = sandbox.Bubblewrap("bwrap", tmp_path, SandboxOptions(), b"")
    assert package.resolve() in box.home_view().toolchains
