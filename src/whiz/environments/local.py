"""Running a shell command in the workspace: its own process group, a timeout, output captured.

The command gets a new session (so a new process group). On timeout, or when the caller is
cancelled (the user interrupted), the whole group is killed, so a test runner's children or a
forgotten `sleep` don't outlive the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from whiz.environments.errors import SandboxUnavailable

# Read no more than this much output into memory; the rest is counted and dropped.
MAX_CAPTURE_BYTES = 4_000_000
# How long a process group gets between SIGTERM and SIGKILL.
KILL_GRACE_S = 1.0


@dataclass
class CommandResult:
    """What a command did. `exit_code` is None when it was killed (timeout or interrupt)."""

    command: str
    exit_code: int | None
    output: str
    duration_ms: float
    timed_out: bool = False
    dropped_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class Environment(Protocol):
    """Runs a command somewhere (here: locally); cancelling the call kills the command."""

    async def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult: ...


@dataclass
class Launch:
    """How a wrapped command starts: its argv, the open descriptors it inherits under their own
    numbers (the runner closes its copies once the command started), and what to tidy up after
    it ended (called once, however it ended)."""

    argv: Sequence[str]
    pass_fds: tuple[int, ...] = ()
    cleanup: Callable[[], None] | None = None

    def close_fds(self) -> None:
        """Close the runner's copies, once: a number closed twice may by then be someone else's."""
        fds, self.pass_fds = self.pass_fds, ()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def finish(self) -> None:
        self.close_fds()
        if self.cleanup is not None:
            self.cleanup()


# Turns a shell command into what starts it (a sandbox puts its launcher in front).
Wrap = Callable[[str], Launch]


def no_bytecode(env: dict[str, str] | None) -> dict[str, str]:
    """`env` (None: this process's) with Python told to write no bytecode. A command here runs code
    the agent has just written: Python takes a module's cached bytecode for its source when the
    source's size and modification second match, so an edit of the same length within the second
    of a run that cached it would run the code from before the edit, and the tests would judge
    that."""
    return {**(os.environ if env is None else env), "PYTHONDONTWRITEBYTECODE": "1"}


class LocalEnvironment:
    """Runs commands with `sh -c` in `cwd`, stdin closed, stdout and stderr merged.

    `timeout_s`: the default limit per command (None: no limit). `env`: the command's environment
    (None: this process's). `wrap`: builds the `Launch` instead of `sh -c command`, so a sandbox
    (`whiz.environments.sandbox`) reuses the group kill, timeout and capture here. `echo`: called
    with each chunk of output as it arrives, for a caller that shows it live.
    """

    def __init__(
        self,
        cwd: Path,
        *,
        timeout_s: float | None = 120.0,
        env: dict[str, str] | None = None,
        wrap: Wrap | None = None,
        echo: Callable[[bytes], None] | None = None,
    ):
        self.cwd = Path(cwd)
        self.timeout_s = timeout_s
        self.env = env
        self.wrap = wrap
        self.echo = echo
        self._preparing = asyncio.Lock()
        """One launch is built at a time, as when the event loop built them: a sandbox's launch
        keeps what it found between commands (the workspace's folders) and is not built for two
        threads at once."""

    async def run(self, command: str, *, timeout_s: float | None = None) -> CommandResult:
        """Run `command`; on timeout or cancellation the process group is killed first."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        started = time.perf_counter()
        try:
            launch = Launch(["/bin/sh", "-c", command]) if self.wrap is None else await self._wrapped(command)
        except SandboxUnavailable as exc:  # the sandbox cannot hold this command: it does not run
            return CommandResult(command, 1, f"not run: {exc.message}\n", 0.0)
        try:
            return await self._run(command, launch, limit, started)
        finally:
            launch.finish()

    async def _wrapped(self, command: str) -> Launch:
        """The wrapped launch, built on a worker thread: a sandbox walks the workspace for secret
        files, nested repositories and dependency folders and takes a file lock, which would hold
        the event loop (and every other client of a server) for as long. A caller cancelled while it
        is built does not wait for it, and the launch it did not get is finished when it is done."""
        assert self.wrap is not None
        async with self._preparing:
            building = asyncio.ensure_future(asyncio.to_thread(self.wrap, command))
            try:
                return await asyncio.shield(building)
            except asyncio.CancelledError:
                building.add_done_callback(_finish_unclaimed)
                raise

    async def _run(self, command: str, launch: Launch, limit: float | None, started: float) -> CommandResult:
        creating = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *launch.argv,
                cwd=self.cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                env=no_bytecode(self.env),
                pass_fds=launch.pass_fds,
            )
        )
        try:
            proc = await asyncio.shield(creating)
        except asyncio.CancelledError:
            # Interrupted while starting: asyncio would kill only the shell and then wait for its
            # children to close the pipe. Let it start, then kill the whole group.
            await _kill_group(await creating)
            raise
        finally:
            if creating.done():
                launch.close_fds()
        chunks: list[bytes] = []
        dropped = 0

        async def read_all() -> None:
            nonlocal dropped
            kept = 0
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                if self.echo is not None:
                    self.echo(chunk)
                if kept < MAX_CAPTURE_BYTES:
                    chunks.append(chunk[: MAX_CAPTURE_BYTES - kept])
                    dropped += max(0, len(chunk) - (MAX_CAPTURE_BYTES - kept))
                    kept += len(chunks[-1])
                else:
                    dropped += len(chunk)
            await proc.wait()

        timed_out = False
        try:
            await asyncio.wait_for(read_all(), limit)
        except TimeoutError:
            timed_out = True
            await _kill_group(proc)
        except BaseException:
            # Cancelled (the user interrupted) or anything else: never leave the group running.
            await _kill_group(proc)
            raise
        output = b"".join(chunks).decode("utf-8", errors="replace")
        return CommandResult(
            command=command,
            exit_code=None if timed_out else proc.returncode,
            output=output,
            duration_ms=(time.perf_counter() - started) * 1000,
            timed_out=timed_out,
            dropped_bytes=dropped,
        )


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the process group, SIGKILL it after a grace period, then read the pipe to its end
    (so its transport closes) once nothing in the group can hold it open."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(proc.wait()), KILL_GRACE_S)
    # The leader may be gone while children ignored SIGTERM: finish the whole group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.communicate(), KILL_GRACE_S)


def truncate(text: str, max_chars: int = 8000) -> str:
    """Keep the head and the tail of long output (errors are usually at the end) for the model."""
    if len(text) <= max_chars:
        return text
    head = max_chars // 3
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


def _finish_unclaimed(building: asyncio.Future[Launch]) -> None:
    """Tidy a launch whose caller was cancelled while it was built (its lock, its descriptors)."""
    if not building.cancelled() and building.exception() is None:
        building.result().finish()
