"""Commands in the workspace: output, exit codes, the whole process group killed on timeout or interrupt."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from pathlib import Path

from whiz.environments.local import Launch, LocalEnvironment, truncate


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as dead.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def wait_for_file(path: Path, timeout_s: float = 5.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)
    return path.read_text().strip()


async def test_output_and_exit_code(tmp_path: Path) -> None:
    env = LocalEnvironment(tmp_path)
    result = await env.run("echo out; echo err >&2; pwd; exit 3")
    assert result.exit_code == 3 and not result.ok
    assert "out" in result.output and "err" in result.output
    assert str(tmp_path.resolve()) in result.output


async def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    env = LocalEnvironment(tmp_path)
    # The child ignores SIGTERM, so only the SIGKILL of the group stops it.
    result = await env.run("sh -c 'trap \"\" TERM; echo $$ > child.pid; sleep 30' & wait", timeout_s=0.5)
    assert result.timed_out and result.exit_code is None
    child = int(await wait_for_file(tmp_path / "child.pid"))
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not alive(child)


async def test_cancel_kills_the_group(tmp_path: Path) -> None:
    env = LocalEnvironment(tmp_path)
    task = asyncio.ensure_future(env.run("sleep 3600 & echo $! > child.pid; wait", timeout_s=7200))
    child = int(await wait_for_file(tmp_path / "child.pid"))
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 60)  # only so a cancel that waits for the command fails
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not alive(child), Path(f"/proc/{child}/stat").read_text()


def test_truncate_keeps_head_and_tail() -> None:
    text = "HEAD" + "x" * 10_000 + "TAIL"
    short = truncate(text, 300)
    assert short.startswith("HEAD") and short.endswith("TAIL") and len(short) < 400
    assert "characters cut" in short
    assert truncate("small", 300) == "small"


async def test_a_launch_being_built_does_not_hold_the_event_loop(tmp_path):
    # A sandbox's launch walks the workspace and takes a file lock: a server's other clients go on.
    released, waited = threading.Event(), []

    def wrap(command: str) -> Launch:
        waited.append(released.wait(timeout=5))  # set by a coroutine: only if the loop is free
        return Launch(["/bin/sh", "-c", command])

    async def release() -> None:
        await asyncio.sleep(0)
        released.set()

    result, _ = await asyncio.gather(LocalEnvironment(tmp_path, wrap=wrap).run("true"), release())
    assert waited == [True] and result.exit_code == 0


async def test_a_launch_its_caller_gave_up_on_is_tidied_once_built(tmp_path):
    building, finish, tidied = threading.Event(), threading.Event(), threading.Event()

    def wrap(command: str) -> Launch:
        building.set()
        finish.wait(timeout=5)
        return Launch(["/bin/sh", "-c", command], cleanup=tidied.set)

    run = asyncio.ensure_future(LocalEnvironment(tmp_path, wrap=wrap).run("true"))
    await asyncio.to_thread(building.wait, 5)
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    finish.set()
    assert await asyncio.to_thread(tidied.wait, 5)


async def test_a_module_edited_within_the_second_at_the_same_size_runs_as_edited(tmp_path: Path) -> None:
    # Python takes cached bytecode for a source of the same size and modification second: had the
    # first run cached it, the second would run the code from before the edit.
    import sys

    (tmp_path / "mod.py").write_text("def f():\n    return 1\n")
    (tmp_path / "check.py").write_text("import mod\nassert mod.f() == 2, mod.f()\n")
    stamp = os.stat(tmp_path / "mod.py").st_mtime_ns
    env = LocalEnvironment(
        tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    )
    assert (await env.run(f"{sys.executable} check.py")).exit_code != 0
    (tmp_path / "mod.py").write_text("def f():\n    return 2\n")  # the same length
    os.utime(tmp_path / "mod.py", ns=(stamp, stamp))  # and the same second
    assert (await env.run(f"{sys.executable} check.py")).exit_code == 0
    assert not (tmp_path / "__pycache__").exists()
