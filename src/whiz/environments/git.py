"""Running git: the one module that starts it, so that nothing a repository holds can make it run a
program.

whiz asks git things it can do without (which files are tracked, a worktree for a copy, a line
merge), outside the sandbox and as the user, in folders the model and a cloned repository can shape.
Left to itself git finds its repository from the working directory (a folder holding `HEAD`,
`config`, `objects/` and `refs/` counts, with no `.git` in sight), reads that repository's config,
and runs what it names: `core.fsmonitor`, hooks, filter and diff drivers. So every call here:

- names its repository outright (`--git-dir`, `--work-tree`): the `.git` at the top of the folder
  whiz was given, and no other (`Repository.at`); git never searches for one;
- reads no system or global config, no `GIT_*` variable from whiz's own environment, and no
  repository config read from a file outside the git folder (an include, a link);
- pins, above whatever the repository's config says, each setting that runs a program for the
  commands whiz uses (`PINNED`, and the drivers the repository defines: `_driver_overrides`);
- starts the `git` found on PATH's absolute folders outside the work tree, never one written there.

A failure is an answer ("no"), never an exception: stdin is closed so git never waits on a prompt,
and each call has a timeout so a hung git (a lock, a network filesystem) cannot hang whiz.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

GIT_TIMEOUT_S = 60.0

PINNED: Mapping[str, str] = {
    # A program git asks what changed in the work tree: `git ls-files`, `diff` and `worktree add`
    # run it on their own.
    "core.fsmonitor": "false",
    # Hooks: `worktree add` runs post-checkout, a ref update runs reference-transaction. No
    # hook can live under /dev/null.
    "core.hooksPath": "/dev/null",
    # Never take a folder that merely looks like a git folder for a repository.
    "safe.bareRepository": "explicit",
    # No transport at all: a partial clone fetches missing objects on demand, and a remote's
    # transport (ssh, `ext::`) is a program.
    "protocol.allow": "never",
    "credential.helper": "",
    "core.askPass": "",
    "core.sshCommand": "false",
    "diff.external": "",
    "core.pager": "cat",
    "core.editor": "false",
    "sequence.editor": "false",
    # A submodule is a repository of its own, with its own config and drivers: `worktree add`
    # would check it out, and `diff` asks it for its status with a git started in it.
    "submodule.recurse": "false",
    "diff.ignoreSubmodules": "all",
    "gc.auto": "0",
    "maintenance.auto": "false",
}
"""Settings that make git start a program, and the value each has in every call whiz makes.
Command-line config (here `GIT_CONFIG_COUNT`) outranks every config file."""

DRIVER_COMMANDS: Mapping[str, tuple[str, ...]] = {
    "filter": ("clean", "smudge", "process"),
    "diff": ("command", "textconv"),
    "merge": ("driver",),
}
"""Per-driver settings that hold a command. A driver's name comes from `.gitattributes` (which a
cloned repository writes) and its command from the repository's config, so their names are only
known by reading that config: `_driver_overrides` empties each one it finds."""

ENVIRONMENT: Mapping[str, str] = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_NO_LAZY_FETCH": "1",
    # No opportunistic index refresh: whiz's questions leave the user's index as they found it.
    "GIT_OPTIONAL_LOCKS": "0",
    # Paths whiz passes are names, never patterns.
    "GIT_LITERAL_PATHSPECS": "1",
}


@dataclass(frozen=True)
class Repository:
    """A git repository whiz may ask things: the git folder of the work tree whose top is `work_tree`."""

    work_tree: Path
    git_dir: Path

    @classmethod
    def at(cls, top: Path) -> Repository | None:
        """The repository whose top level is `top` (through `top/.git`, a folder or a `gitdir:`
        file), or None: where there is no `.git` there, where it is not a git folder, and where
        it (or the common folder a worktree's `commondir` names) leads to another folder inside
        `top`: the work tree's files, which the model edits, are not its git folder. A folder
        below a repository's top is no top: whiz runs no git for it."""
        top = Path(top).resolve()
        dot = top / ".git"
        try:
            if dot.is_dir():
                git_dir = dot.resolve()
            elif dot.is_file():
                text = dot.read_text(encoding="utf-8").strip()
                if not text.startswith("gitdir:"):
                    return None
                git_dir = (top / text.removeprefix("gitdir:").strip()).resolve()
            else:
                return None
        except (OSError, UnicodeDecodeError, RuntimeError):
            return None
        if not _looks_like_git_dir(git_dir):
            return None
        found = cls(top, git_dir)
        if any(home != dot and home.is_relative_to(top) for home in found._git_dirs()):
            return None
        return found

    def run(
        self, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT_S
    ) -> subprocess.CompletedProcess[bytes] | None:
        """Run `git ARGS` on this repository. None when git cannot run or times out, and, with
        `check`, when it exits non-zero (without `check` the caller reads the exit status)."""
        config = self._pinned_config(timeout)
        if config is None:
            return None
        return _finish(self._git(list(args), config, timeout), check)

    def _pinned_config(self, timeout: float) -> dict[str, str] | None:
        """PINNED, and an empty command for each driver the repository's config defines. None where
        that config reads a file outside the git folder (an include): one the work tree's side
        could change between this reading and the command."""
        listed = self._git(["config", "--list", "--show-origin", "-z"], PINNED, timeout)
        if listed is None or listed.returncode != 0:
            return None
        fields = listed.stdout.split(b"\0")
        origins, entries = fields[0:-1:2], fields[1::2]
        homes = self._git_dirs()
        for origin in origins:
            kind, _, where = origin.decode("utf-8", errors="surrogateescape").partition(":")
            if kind == "command line":
                continue
            if kind != "file" or not any(Path(where).resolve().is_relative_to(home) for home in homes):
                return None
        return {**PINNED, **_driver_overrides(entries)}

    def _git_dirs(self) -> list[Path]:
        """The git folder, and the common one a linked worktree's `commondir` names."""
        try:
            common = (self.git_dir / "commondir").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return [self.git_dir]
        return [self.git_dir, (self.git_dir / common).resolve()]

    def _git(
        self, args: list[str], config: Mapping[str, str], timeout: float
    ) -> subprocess.CompletedProcess[bytes] | None:
        named = [f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}"]
        return _run([*named, *args], self.work_tree, self.work_tree.parent, config, timeout)


def run_outside_repositories(
    folder: Path, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT_S
) -> subprocess.CompletedProcess[bytes] | None:
    """Run `git ARGS` in `folder` (one whiz made, e.g. for `git merge-file`) where no repository is
    wanted: git looks for one in `folder` alone, never in the folders above it (a ceiling at the
    folder itself would not count: git skips one equal to where it starts). As `Repository.run`."""
    folder = Path(folder).resolve()
    return _finish(_run(list(args), folder, folder.parent, PINNED, timeout), check)


def _looks_like_git_dir(path: Path) -> bool:
    """A git folder has HEAD and its objects (a worktree's has a `commondir` that leads to them)."""
    return (path / "HEAD").is_file() and ((path / "objects").is_dir() or (path / "commondir").is_file())


def _driver_overrides(entries: list[bytes]) -> dict[str, str]:
    """Empty commands for each filter, diff and merge driver named in `entries` (`key\\nvalue`, as
    `git config --list -z` prints them); filters are made optional too, so that one left without
    its command is skipped rather than fatal."""
    overrides = {}
    for entry in entries:
        key = entry.partition(b"\n")[0].decode("utf-8", errors="surrogateescape")
        section, _, rest = key.partition(".")
        name, _, _variable = rest.rpartition(".")
        if section.lower() in DRIVER_COMMANDS and name:
            for variable in DRIVER_COMMANDS[section.lower()]:
                overrides[f"{section}.{name}.{variable}"] = ""
            if section.lower() == "filter":
                overrides[f"filter.{name}.required"] = "false"
    return overrides


def _search_path(cwd: Path) -> str:
    """PATH's absolute folders outside `cwd`'s tree, for finding git and for git's own use: a
    relative entry (`.`, an empty one) or one in the work tree (an activated `.venv/bin`) would
    find a `git` (or a `sh`) that was written there."""
    folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(f for f in folders if os.path.isabs(f) and not Path(f).is_relative_to(cwd))


def _environment(search_path: str, ceiling: Path, config: Mapping[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(ENVIRONMENT)
    env["PATH"] = search_path
    env["GIT_CEILING_DIRECTORIES"] = str(ceiling)
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for index, (key, value) in enumerate(config.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def _run(
    args: list[str], cwd: Path, ceiling: Path, config: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[bytes] | None:
    search_path = _search_path(cwd)
    program = shutil.which("git", path=search_path) if search_path else None
    if program is None:
        return None
    try:
        return subprocess.run(
            [program, *args],
            cwd=cwd,
            env=_environment(search_path, ceiling, config),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _finish(
    done: subprocess.CompletedProcess[bytes] | None, check: bool
) -> subprocess.CompletedProcess[bytes] | None:
    if done is None or (check and done.returncode != 0):
        return None
    return done
