"""Confined commands: the modes the Codex CLI made familiar, enforced on Linux by bubblewrap.

- `read-only`: the command reads the filesystem, writes only to a private /tmp, no network.
- `workspace-write` (the default): it also writes inside the workspace (and `writable` folders),
  but the workspace's `.git` stays read-only, so it cannot rewrite hooks, config or history.
- `danger-full-access`: no confinement, as `LocalEnvironment` always did. Only when asked for.

In both confined modes the command gets a private /tmp (TMPDIR points there; it is gone when the
command ends), no network (unless `network`), only the environment variables `envvars` lets
through, and its own PID namespace: when the command ends, everything it started ends with it,
even a process that detached with `setsid` or `nohup`. Dependency folders an isolated copy links
in (`dependencies`) are mounted read-only. Where bubblewrap is missing or cannot create its
namespaces, a confined mode refuses to run (`SandboxUnavailable`) instead of running unconfined.

Bubblewrap rather than Landlock: one tool gives read-only mounts, the network and PID namespaces
and works on kernels without Landlock; Landlock alone cannot end detached processes.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

from whiz.environments.dependencies import shared_dependencies
from whiz.environments.envvars import confined_env
from whiz.environments.errors import SandboxUnavailable
from whiz.environments.local import Environment, LocalEnvironment

# How long the check that bubblewrap can create its namespaces may take.
PROBE_TIMEOUT_S = 10.0
# The exit code `run_sandboxed` returns for a command that ran out of time, as timeout(1) does.
TIMED_OUT_EXIT_CODE = 124


class SandboxMode(StrEnum):
    """How far a command may reach; the values are the names users type."""

    READ_ONLY = "read-only"
    WORKSPACE_WRITE = "workspace-write"
    DANGER_FULL_ACCESS = "danger-full-access"


@dataclass(frozen=True)
class SandboxOptions:
    """Everything that decides how a command is confined."""

    mode: SandboxMode = SandboxMode.WORKSPACE_WRITE
    """What the command may change; see the module docstring."""
    writable: tuple[Path, ...] = ()
    """More folders the command may write to, in `workspace-write` only (`read-only` writes nowhere).
    Folders that do not exist are left out."""
    network: bool = False
    """Let a confined command use the network (it then shares this machine's, loopback included)."""
    bwrap: str = "bwrap"
    """The bubblewrap executable: a name looked up on PATH, or a path."""


@dataclass(frozen=True)
class Bubblewrap:
    """Builds the bwrap argv that runs a shell command confined to `workspace` under `options`."""

    executable: str
    workspace: Path
    options: SandboxOptions

    def argv(self, command: str) -> list[str]:
        """The argv, rebuilt per command, since `.git` or a linked dependency may appear between two."""
        ws = str(self.workspace)
        # Later mounts cover earlier ones: the read-only root, then a private /tmp (which would hide a
        # workspace under /tmp), then the workspace, then the read-only parts inside it.
        args = [self.executable, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for tools in tools_under_tmp():
            args += ["--ro-bind", tools, tools]
        if self.options.mode is SandboxMode.WORKSPACE_WRITE:
            args += ["--bind", ws, ws]
            for folder in self.options.writable:
                if Path(folder).is_dir():
                    args += ["--bind", str(folder), str(folder)]
            git = self.workspace / ".git"
            if git.exists():
                args += ["--ro-bind", str(git), str(git)]
        else:
            args += ["--ro-bind", ws, ws]
        for target in shared_dependencies(self.workspace):
            args += ["--ro-bind", str(target), str(target)]
        # No --new-session: the runner already starts bwrap in a session of its own, without a
        # terminal, and the process inside that is init of the new pid namespace must stay in the
        # runner's process group, so that killing the group ends the namespace and everything in
        # it. (--die-with-parent alone is not enough: the kernel drops a parent-death signal when
        # bwrap changes its credentials, and a killed command's processes were seen to survive.)
        args += ["--unshare-pid", "--die-with-parent"]
        if not self.options.network:
            args.append("--unshare-net")
        args += ["--setenv", "TMPDIR", "/tmp", "--chdir", ws, "--", "/bin/sh", "-c", command]
        return args


def tools_under_tmp() -> list[str]:
    """Folders under /tmp the command needs to find its programs: whiz's own Python (a venv made
    in /tmp, as CI clones often are), whiz's own package (an editable install's source: `--check`
    runs `runs_check.py` from it) and PATH entries. The private /tmp would hide them, and then
    `python`, the check or a test runner is missing inside the sandbox. They are mounted read-only."""
    found: list[str] = []
    package = str(Path(__file__).resolve().parents[1])
    candidates = [sys.prefix, sys.base_prefix, package, *os.environ.get("PATH", "").split(os.pathsep)]
    for folder in candidates:
        if not folder or not os.path.isabs(folder):
            continue
        real = os.path.realpath(folder)
        if (real + "/").startswith("/tmp/") and os.path.isdir(real) and real not in found:
            found.append(real)
    # A folder inside another one is already visible through it.
    return [f for f in found if not any(f != o and f.startswith(o + "/") for o in found)]


def environment_for(
    cwd: Path, options: SandboxOptions | None = None, timeout_s: float | None = 120.0
) -> Environment:
    """The environment that runs commands in `cwd` as `options` say (default: workspace-write).

    Use it wherever a model-written command runs, instead of constructing `LocalEnvironment`.
    Raises `SandboxUnavailable` for a confined mode this machine cannot enforce; the check starts
    bwrap once (a few milliseconds).
    """
    return _environment(Path(cwd), options or SandboxOptions(), timeout_s, echo=None)


async def run_sandboxed(
    cwd: Path,
    argv: Sequence[str],
    options: SandboxOptions | None = None,
    *,
    timeout_s: float | None = None,
    out: BinaryIO | None = None,
) -> int:
    """Run `argv` in `cwd` as `options` say, writing its output (stdout and stderr merged) to `out`
    (default: this process's stdout) as it comes; return its exit code, 124 when it timed out.

    For `whiz sandbox [--mode M] -- CMD`. stdin is closed, so interactive programs see end of
    input. Raises `SandboxUnavailable` before running anything when the mode cannot be enforced.
    """
    sink = out if out is not None else sys.stdout.buffer

    def echo(chunk: bytes) -> None:
        sink.write(chunk)
        sink.flush()

    env = _environment(Path(cwd), options or SandboxOptions(), timeout_s, echo=echo)
    result = await env.run(shlex.join(argv))
    if result.exit_code is None:
        return TIMED_OUT_EXIT_CODE
    # A command ended by a signal: the shell's convention, 128 + the signal's number.
    return result.exit_code if result.exit_code >= 0 else 128 - result.exit_code


def run_confined(
    cwd: Path, argv: Sequence[str], options: SandboxOptions | None = None, *, timeout_s: float
) -> subprocess.CompletedProcess[bytes] | None:
    """`argv` in `cwd` as `options` say, from code that is not async (a benchmark's check of what a
    model wrote); None when it ran past `timeout_s`, then everything it started is gone too."""
    options = options or SandboxOptions()
    command = shlex.join(argv)
    env = None
    if options.mode is not SandboxMode.DANGER_FULL_ACCESS:
        argv = Bubblewrap(_working_bwrap(options.bwrap), Path(cwd).resolve(), options).argv(command)
        env = confined_env(os.environ)
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the whole group, the sandbox too
        proc.communicate()
        return None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out)


def _environment(
    cwd: Path, options: SandboxOptions, timeout_s: float | None, echo: Callable[[bytes], None] | None
) -> LocalEnvironment:
    if options.mode is SandboxMode.DANGER_FULL_ACCESS:
        return LocalEnvironment(cwd, timeout_s=timeout_s, echo=echo)
    bubblewrap = Bubblewrap(_working_bwrap(options.bwrap), cwd.resolve(), options)
    return LocalEnvironment(
        cwd, timeout_s=timeout_s, env=confined_env(os.environ), wrap=bubblewrap.argv, echo=echo
    )


def _working_bwrap(name: str) -> str:
    """The bwrap executable, once it has shown it can build the namespaces a confined run needs."""
    way_out = "or choose the danger-full-access sandbox mode"
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"cannot confine commands: the sandbox needs Linux; {way_out}")
    executable = shutil.which(name)
    if executable is None:
        raise SandboxUnavailable(
            f"cannot confine commands: bubblewrap ({name}) is not installed; install it "
            f"(apt-get install bubblewrap) {way_out}"
        )
    probe = [executable, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    probe += ["--unshare-pid", "--unshare-net", "--die-with-parent", "--", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, stdin=subprocess.DEVNULL, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(
            f"cannot confine commands: {executable} did not start ({exc}); {way_out}"
        ) from exc
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        why = lines[0] if lines else f"exit code {done.returncode}"
        raise SandboxUnavailable(
            f"cannot confine commands: bubblewrap cannot create its namespaces here ({why}); "
            f"allow unprivileged user namespaces {way_out}"
        )
    return executable
