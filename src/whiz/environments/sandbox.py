"""Confined commands: the modes the Codex CLI made familiar, enforced on Linux by bubblewrap.

- `read-only`: the command reads the filesystem, writes only to a private /tmp, no network.
- `workspace-write` (the default): it also writes inside the workspace (and `writable` folders),
  but the workspace's `.git` stays read-only (`protected_git`), so it cannot rewrite hooks, config
  or history, and so do its dependency folders (`.venv`, `node_modules`, ...), whose code runs
  outside the next time the user starts Python or node there (unless `allow_env_writes`).
- `danger-full-access`: no confinement, as `LocalEnvironment` always did. Only when asked for.

In both confined modes the command gets a private /tmp (TMPDIR points there; it is gone when the
command ends), no network (unless `network`), only the environment variables `envvars` lets
through, and its own PID namespace: when the command ends, everything it started ends with it,
even a process that detached with `setsid` or `nohup`. It holds no capabilities, and when whiz
runs as root it runs as `nobody` in a user namespace of its own (so `mount` cannot undo the
read-only binds). It has its own IPC namespace, sees neither the host's runtime folders (`/run`,
`$XDG_RUNTIME_DIR`) nor the home folders, yours, other users' and root's, beyond the toolchains
in them and what the user allowed by name (`home`; the home's secret stores stay hidden inside
those: `hidden`), nor the workspace's own secret files (`secret_paths`: `.env`, keys,
credentials, unless the user let them through) nor a token in the git config
(`git_credentials`), and a seccomp filter (`seccomp`) refuses new unix sockets, so it cannot
reach a socket server on the host.
Dependency folders an isolated copy links in (`dependencies`) are mounted read-only. Where
bubblewrap is missing or cannot build all of this, a confined mode refuses to run
(`SandboxUnavailable`) instead of running unconfined. docs/sandbox.md has the threat model.

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
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

from whiz.environments.dependencies import shared_dependencies, workspace_dependencies
from whiz.environments.envvars import confined_env
from whiz.environments.errors import SandboxUnavailable
from whiz.environments.git_credentials import configs_with_credentials
from whiz.environments.hidden import homes, overlaps, runtime_folders, secret_stores
from whiz.environments.home import HomeView, home_view
from whiz.environments.local import Environment, Launch, LocalEnvironment
from whiz.environments.protected_git import WorkspaceLock, git_mounts, nested_repositories
from whiz.environments.seccomp import UnsupportedArchitecture, unix_socket_filter
from whiz.environments.secret_paths import SecretFinder, search_root
from whiz.environments.secret_rules import SecretFiles

# How long the check that bubblewrap can create its namespaces may take.
PROBE_TIMEOUT_S = 10.0
# The exit code `run_sandboxed` returns for a command that ran out of time, as timeout(1) does.
TIMED_OUT_EXIT_CODE = 124
# Who a confined command runs as when whiz runs as root: nobody, mapped onto root outside but
# without a single capability (an unprivileged caller keeps its own id).
UNPRIVILEGED_ID = 65534
# The resolver's configuration, often a link into /run, which the sandbox hides.
RESOLV_CONF = "/etc/resolv.conf"


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
    allow_env_writes: bool = False
    """In `workspace-write`, let the command change the workspace's dependency folders (`.venv`,
    `venv`, `node_modules`, `.tox`, whiz's own environment when it lives there), so `pip install`
    or `npm install` work. The risk: what it installs there (a `.pth` file, a patched package) runs
    outside the sandbox the next time you start Python or node in the project."""
    secret_files: SecretFiles = field(default_factory=SecretFiles)
    """Which of the workspace's files look like secrets (`.env`, keys, credentials, and the user's
    `--secret-file` globs): the same rules that keep them from the model. A confined command finds
    each one hidden (a file empty and unreadable, a folder of them empty), so it cannot pass a
    value on in a form output masking misses (`cat .env | base64`)."""
    allow_secret_reads: bool = False
    """Let confined commands read the workspace's secret files (tests that load `.env`). The risk:
    a command the model writes can then send their values to the model in any encoding."""
    allow: tuple[Path, ...] = ()
    """Files and folders of the home folders (`~/...`: of `$HOME`) that confined commands may
    read, read-only, beside the toolchains they see anyway (`home.TOOLCHAINS`); the rest of every
    home is hidden. `--sandbox-allow PATH`, or `allow = [...]` in the config file's `[sandbox]`
    table. The risk: a command the model writes can send what it reads there to the model; the
    known secret stores inside them stay hidden (`hidden.SECRET_STORES`), others do not."""
    bwrap: str = "bwrap"
    """The bubblewrap executable: a name looked up on PATH, or a path."""


@dataclass(frozen=True)
class Bubblewrap:
    """Builds what runs a shell command confined to `workspace` under `options`: the bwrap argv,
    the seccomp filter it reads (`filter_bpf`), and the tidying after it."""

    executable: str
    workspace: Path
    options: SandboxOptions
    filter_bpf: bytes
    euid: int = field(default_factory=os.geteuid)
    """Whose command it is: root's runs as `UNPRIVILEGED_ID` inside."""
    shown: Collection[str] = ()
    """Secret files (paths relative to the workspace, symlinks resolved) the user let the model
    see: commands see them too. A live collection: a file let through later shows from the next
    command on."""

    def __post_init__(self) -> None:
        # Remembers the workspace's folders between commands (`secret_paths`).
        object.__setattr__(self, "_secrets", SecretFinder(self.options.secret_files))
        object.__setattr__(self, "_secrets_root", search_root(self.workspace, homes(os.environ, self.euid)))

    def launch(self, command: str) -> Launch:
        """Rebuilt per command, since `.git`, a dependency folder or a secret file may appear
        between two."""
        lock = WorkspaceLock(self.workspace) if self._writes_workspace else None
        copies: list[Path] = []

        def tidy() -> None:
            if lock is not None:
                lock.release_and_tidy()
            for folder in copies:
                shutil.rmtree(folder, ignore_errors=True)

        launch = Launch([], cleanup=tidy)
        try:
            read_end, write_end = os.pipe()
            launch.pass_fds = (read_end,)
            try:
                os.write(write_end, self.filter_bpf)  # a few hundred bytes: the pipe holds them
            finally:
                os.close(write_end)
            configs = []
            for target, text in configs_with_credentials(self.workspace):
                folder = Path(tempfile.mkdtemp(prefix="whiz-git-config-"))
                copies.append(folder)
                (folder / "config").write_text(text)
                configs.append((folder / "config", target))
            launch.argv = self.argv(command, read_end, configs)
        except BaseException:
            launch.finish()
            raise
        return launch

    @property
    def _writes_workspace(self) -> bool:
        return self.options.mode is SandboxMode.WORKSPACE_WRITE

    def home_view(self, runtime: Sequence[Path] = ()) -> HomeView:
        """What the command sees of the home folders (`home`); `runtime`: the runtime folders
        covered too, whose tools are mounted again as the homes' are."""
        return home_view(
            os.environ,
            self.euid,
            self.options.allow,
            workspace_envs=[
                *workspace_dependencies(self.workspace, []),
                *shared_dependencies(self.workspace),
            ],
            hidden_before=["/tmp", *map(str, runtime)],
            package=Path(__file__).resolve().parents[1],
            prefixes=[sys.prefix, sys.base_prefix],
        )

    def argv(self, command: str, seccomp_fd: int, git_configs: Sequence[tuple[Path, Path]] = ()) -> list[str]:
        """The bwrap argv; `seccomp_fd`: an open descriptor bwrap reads the filter from;
        `git_configs`: (copy without credentials, the git config it stands in for) pairs."""
        ws = str(self.workspace)
        environ = os.environ
        # Namespaces: as root, a user namespace where the command is nobody (for anyone else
        # bubblewrap makes one itself, or, installed setuid where user namespaces are off, drops
        # to the caller's id); no capabilities either way; its own IPC (System V shared memory,
        # message queues), host name and cgroup view. No --new-session: see the note before
        # --unshare-pid below.
        args = [self.executable]
        if self.euid == 0:
            args += ["--unshare-user", "--uid", str(UNPRIVILEGED_ID), "--gid", str(UNPRIVILEGED_ID)]
        args += ["--cap-drop", "ALL", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        # Later mounts cover earlier ones: the read-only root, then a private /tmp and /run (which
        # would hide a workspace there), then the workspace, then what stays read-only inside what
        # it may write, and last the secret stores, so that no bind shows one again.
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        runtime = _runtime(environ)
        for folder in runtime:
            args += ["--tmpfs", str(folder)]
        # The home folders, empty but for their toolchains and what the user allowed: before the
        # workspace, which is often inside one.
        view = self.home_view(runtime)
        args += view.mounts()
        resolver = os.path.realpath(RESOLV_CONF)
        if _under(resolver, [str(r) for r in runtime]) and os.path.isfile(resolver):
            args += ["--ro-bind", resolver, resolver]
        writable: list[Path] = []
        if self._writes_workspace:
            args += ["--bind", ws, ws]
            writable = [self.workspace]
            for folder in self.options.writable:
                if Path(folder).is_dir():
                    args += ["--bind", str(folder), str(folder)]
                    writable.append(Path(folder).resolve())
        else:
            args += ["--ro-bind", ws, ws]
        for i, root in enumerate(writable):
            args += git_mounts(root, writable, plant=i == 0)
            for nested in nested_repositories(root):
                args += git_mounts(nested, writable, plant=False)
        if self._writes_workspace and not self.options.allow_env_writes:
            prefixes = [sys.prefix, environ.get("VIRTUAL_ENV", ""), environ.get("CONDA_PREFIX", "")]
            for folder in workspace_dependencies(self.workspace, prefixes):
                args += ["--ro-bind", str(folder), str(folder)]
        # The workspace's secret files (and, in a sub-folder of a repository, the repository's):
        # after the workspace and its `.git`, so no bind shows one.
        if not self.options.allow_secret_reads:
            for secret in self._secrets.find(self._secrets_root, self.shown, self.workspace):
                args += _hidden(secret)
        for copy, config in git_configs:
            args += ["--ro-bind", str(copy), str(config)]
        # A workspace inside a secret store is where the user chose to work: that one stays seen.
        stores = [
            s
            for s in secret_stores(homes(environ, self.euid), environ.get("WHIZ_HOME", ""))
            if not any(w.is_relative_to(s) for w in [self.workspace, *writable])
        ]
        shared = []
        for target in shared_dependencies(self.workspace):
            # A link the command itself planted (`.venv -> ~/.ssh`, `node_modules -> ~/.config`)
            # must not show what is hidden.
            if not overlaps(target, [*runtime, *stores]) and view.may_mount(target):
                args += ["--ro-bind", str(target), str(target)]
                shared.append(target)
        # Last, so that no bind shows one again; only those a command could see at all.
        for store in stores:
            if view.shows(store, also=[self.workspace, *writable, *shared]):
                args += _hidden(store)
        # No --new-session: the runner already starts bwrap in a session of its own, without a
        # terminal, and the process inside that is init of the new pid namespace must stay in the
        # runner's process group, so that killing the group ends the namespace and everything in
        # it. (--die-with-parent alone is not enough: the kernel drops a parent-death signal when
        # bwrap changes its credentials, and a killed command's processes were seen to survive.)
        args += ["--unshare-pid", "--die-with-parent"]
        if not self.options.network:
            args.append("--unshare-net")
        args += ["--seccomp", str(seccomp_fd)]
        args += ["--setenv", "TMPDIR", "/tmp", "--chdir", ws, "--", "/bin/sh", "-c", command]
        return args


def _hidden(path: Path) -> list[str]:
    """An empty read-only folder over a folder, /dev/null over a file."""
    if path.is_dir():
        return ["--tmpfs", str(path), "--remount-ro", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def _runtime(environ: Mapping[str, str]) -> list[Path]:
    """The runtime folders the sandbox covers (one in /tmp is gone with the private /tmp)."""
    return [p for p in runtime_folders(environ) if not _under(str(p), ["/tmp"])]


def sandbox_summary(cwd: Path, options: SandboxOptions | None = None) -> list[str]:
    """What a confined command in `cwd` sees of the home folders, in lines for people
    (`whiz sandbox` prints them before the command)."""
    box = Bubblewrap(
        options and options.bwrap or "bwrap", Path(cwd).resolve(), options or SandboxOptions(), b""
    )
    return box.home_view(_runtime(os.environ)).describe()


def _under(path: str, folders: Sequence[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def environment_for(
    cwd: Path,
    options: SandboxOptions | None = None,
    timeout_s: float | None = 120.0,
    *,
    shown: Collection[str] = (),
) -> Environment:
    """The environment that runs commands in `cwd` as `options` say (default: workspace-write).

    Use it wherever a model-written command runs, instead of constructing `LocalEnvironment`.
    `shown`: the secret files the user let the model see (`Bubblewrap.shown`). Raises
    `SandboxUnavailable` for a confined mode this machine cannot enforce; the check starts bwrap
    once (a few milliseconds).
    """
    return _environment(Path(cwd), options or SandboxOptions(), timeout_s, echo=None, shown=shown)


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
    launch, env = Launch(list(argv)), None
    if options.mode is not SandboxMode.DANGER_FULL_ACCESS:
        launch = _checked_bubblewrap(Path(cwd).resolve(), options).launch(command)
        env = confined_env(os.environ)
    try:
        proc = subprocess.Popen(
            list(launch.argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True, pass_fds=launch.pass_fds,
        )  # fmt: skip
        launch.close_fds()
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the whole group, the sandbox too
            proc.communicate()
            return None
    finally:
        launch.finish()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out)


def _environment(
    cwd: Path,
    options: SandboxOptions,
    timeout_s: float | None,
    echo: Callable[[bytes], None] | None,
    shown: Collection[str] = (),
) -> LocalEnvironment:
    if options.mode is SandboxMode.DANGER_FULL_ACCESS:
        return LocalEnvironment(cwd, timeout_s=timeout_s, echo=echo)
    bubblewrap = _checked_bubblewrap(cwd.resolve(), options, shown)
    return LocalEnvironment(
        cwd, timeout_s=timeout_s, env=confined_env(os.environ), wrap=bubblewrap.launch, echo=echo
    )


def _checked_bubblewrap(workspace: Path, options: SandboxOptions, shown: Collection[str] = ()) -> Bubblewrap:
    """The sandbox for `workspace`, once it has shown that it confines: the real argv ran a probe
    that found no capabilities and the seccomp filter in place."""
    way_out = "or choose the danger-full-access sandbox mode"
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"cannot confine commands: the sandbox needs Linux; {way_out}")
    executable = shutil.which(options.bwrap)
    if executable is None:
        raise SandboxUnavailable(
            f"cannot confine commands: bubblewrap ({options.bwrap}) is not installed; install it "
            f"(apt-get install bubblewrap) {way_out}"
        )
    if not workspace.is_dir():
        raise SandboxUnavailable(f"cannot confine commands in {workspace}: it is not a folder")
    try:
        bubblewrap = Bubblewrap(executable, workspace, options, unix_socket_filter(), shown=shown)
    except UnsupportedArchitecture as exc:
        raise SandboxUnavailable(f"cannot confine commands: {exc}; {way_out}") from None
    launch = bubblewrap.launch("exec cat /proc/self/status")
    try:
        done = subprocess.run(
            list(launch.argv), capture_output=True, stdin=subprocess.DEVNULL, timeout=PROBE_TIMEOUT_S,
            pass_fds=launch.pass_fds, cwd=workspace, env=confined_env(os.environ),
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(
            f"cannot confine commands: {executable} did not start ({exc}); {way_out}"
        ) from exc
    finally:
        launch.finish()
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        why = lines[0] if lines else f"exit code {done.returncode}"
        raise SandboxUnavailable(
            f"cannot confine commands: bubblewrap cannot create its namespaces here ({why}); "
            f"allow unprivileged user namespaces {way_out}"
        )
    status = dict(
        line.split(":", 1) for line in done.stdout.decode(errors="replace").splitlines() if ":" in line
    )
    capabilities = status.get("CapEff", "").strip() or "unknown"
    if capabilities.strip("0"):
        raise SandboxUnavailable(
            f"cannot confine commands: {executable} left the command capabilities ({capabilities}); {way_out}"
        )
    if status.get("Seccomp", "").strip() != "2":
        raise SandboxUnavailable(
            f"cannot confine commands: {executable} did not apply the system-call filter; {way_out}"
        )
    return bubblewrap
