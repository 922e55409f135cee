"""Isolated copies of a workspace: a place where a candidate edit or a swarm worker can change files
and run the tests without touching the user's folder.

Where the folder is the top of a git repository (its own `.git`), the copy is a detached `git
worktree` of HEAD, brought up to the working tree's state (every change against HEAD, staged or
not, and untracked files copied over; deleted ones removed): cheap for big repositories, and it
leaves out what git ignores. Elsewhere (a sub-folder of a repository included) it is a plain copy:
git runs only on the repository whose top is the folder, and with nothing that repository's config
names able to run (`git.py`). Either way, big dependency folders (`dependencies.DEPENDENCY_DIRS`:
.venv, node_modules) are symlinked rather than copied, so the tests find their packages. The link leads
to the user's real environment: run candidates through the sandbox (`sandbox.environment_for`),
which mounts the link's target read-only, so their tests cannot install into it or change it.
A copy leaves the workspace's secret files out (`secret_paths`: `.env`, keys, credentials), so
they do not linger in the temporary folder; where the user lets commands read them
(`keep_secrets`), the copy has them all, git-ignored ones included, as its tests would need.
Nothing here touches the user's branches, index or history; a worktree is registered under
.git/worktrees only while the copy exists.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from whiz.environments.dependencies import DEPENDENCY_DIRS
from whiz.environments.git import Repository
from whiz.environments.processes import alive
from whiz.environments.secret_paths import secret_paths
from whiz.environments.secret_rules import SecretFiles
from whiz.errors import WhizError

# Never copied: caches and the repository itself.
SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})


class CopyError(WhizError):
    """The workspace could not be copied (disk full, unreadable files)."""


@dataclass
class IsolatedCopy:
    """A copy of `source` at `path`. Read it, change it, run commands in it; `close()` removes it."""

    source: Path
    path: Path
    kind: Literal["git-worktree", "copy"]
    _holder: Path
    """The temporary folder to delete."""
    _repo: Repository | None = None
    """The repository the copy is a worktree of."""

    def read_text(self, rel: str) -> str | None:
        """The copy's text of `rel`, or None when the file is absent (or not UTF-8 text)."""
        return _read(self.path / rel)

    def close(self) -> None:
        """Remove the copy (and the worktree's registration). Safe to call twice."""
        removed = None
        if self._repo is not None:
            removed = self._repo.run("worktree", "remove", "--force", str(self._holder / "tree"))
        shutil.rmtree(self._holder, ignore_errors=True)
        if self._repo is not None and removed is None:
            # The folder is gone now, so pruning drops the worktree's registration in .git/worktrees.
            self._repo.run("worktree", "prune", check=False)
        self._repo = None

    def __enter__(self) -> IsolatedCopy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


OWNER_FILE = "whiz-owner.pid"
"""In each copy's temporary folder: the id of the process that made it, so a later whiz can tell a
copy that a killed process left behind from one still in use."""


def sweep_stale_copies(source: Path | None = None, temp_dir: Path | None = None) -> list[Path]:
    """Remove the copies whose process is gone (a whiz killed mid-heal leaves its copies in the
    temporary folder, and their registrations in the repository's `.git/worktrees`); returns the
    folders removed. Copies of a live process, and folders that are not whiz's, are left alone."""
    removed = []
    for holder in Path(temp_dir or tempfile.gettempdir()).glob("whiz-*"):
        try:
            owner = int((holder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not a copy (or one from before owners were written): not ours to judge
        if alive(owner):
            continue
        shutil.rmtree(holder, ignore_errors=True)
        removed.append(holder)
    repo = Repository.at(source) if source is not None else None
    if removed and repo is not None:
        repo.run("worktree", "prune", check=False)
    return removed


def isolated_copy(
    source: Path,
    *,
    use_git: bool = True,
    prefix: str = "whiz-copy-",
    secrets: SecretFiles | None = None,
    keep_secrets: bool = False,
) -> IsolatedCopy:
    """Copy `source` (its current state, uncommitted changes included) into a new temporary folder.
    `secrets`: which files look like secrets (default: the built-in rules); the copy leaves them
    out, or with `keep_secrets` holds every one of them.

    Blocking (it runs git or copies files): call it with `asyncio.to_thread` from async code.
    Raises `CopyError` when the copy cannot be made.
    """
    source = Path(source).resolve()
    if not source.is_dir():
        raise CopyError(f"{source} is not a folder")
    holder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        (holder / OWNER_FILE).write_text(str(os.getpid()))
        repo = Repository.at(source) if use_git else None
        if repo is not None and _worktree_add(repo, holder / "tree"):
            copy = IsolatedCopy(source, holder / "tree", "git-worktree", holder, repo)
            try:
                _sync_dirty(repo, holder / "tree")
            except BaseException:
                copy.close()
                raise
        else:
            copy = IsolatedCopy(source, holder / "tree", "copy", holder)
            shutil.copytree(source, copy.path, symlinks=True, ignore=_ignore(source))
        _link_dependencies(source, copy.path)
        _settle_secrets(source, copy.path, secrets or SecretFiles(), keep=keep_secrets)
        return copy
    except OSError as exc:
        shutil.rmtree(holder, ignore_errors=True)
        raise CopyError(f"could not copy {source}: {exc.strerror or exc}") from exc


def _ignore(root: Path):
    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n in SKIP_DIRS}
        if Path(folder) == root:
            skipped |= {n for n in names if n in DEPENDENCY_DIRS}
        return skipped

    return ignore


def _link_dependencies(source: Path, copy: Path) -> None:
    for name in DEPENDENCY_DIRS:
        original = source / name
        if original.is_dir() and not (copy / name).exists():
            (copy / name).symlink_to(original, target_is_directory=True)


def _settle_secrets(source: Path, copy: Path, rules: SecretFiles, *, keep: bool) -> None:
    """Leave `source`'s secret files out of `copy` (a tracked `.env`, one copied as untracked, a
    hard link's other name), or with `keep` bring over those the copy lacks (git-ignored ones)."""
    for path in secret_paths(source, rules):
        dest = copy / path.relative_to(source)
        if keep:
            if not os.path.lexists(dest) and path.is_file():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest)
            elif not os.path.lexists(dest) and path.is_dir():
                shutil.copytree(path, dest, symlinks=True)
        elif dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        else:
            with contextlib.suppress(FileNotFoundError):
                dest.unlink()


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, UnicodeDecodeError):
        return None


# -- git ---------------------------------------------------------------------------------------------


def _worktree_add(repo: Repository, dest: Path) -> bool:
    """A detached worktree of HEAD at `dest`; False where there is no commit yet (or git says no).
    No hook runs (post-checkout would), and no filter the repository's config defines."""
    return repo.run("worktree", "add", "--detach", "--quiet", str(dest), "HEAD") is not None


def _sync_dirty(repo: Repository, tree: Path) -> None:
    """Make the worktree match the working tree: changed and untracked files over, deleted ones out.

    Changed means against HEAD, not the index: a file that is staged (added, modified, removed)
    and not changed since is as much part of the working tree as an unstaged edit.
    """
    top = repo.work_tree
    # A submodule is asked for its own status by a git started in it, under that repository's
    # config: its drivers are not among those pinned here. Its changes are not copied anyway.
    changed = repo.run(
        "diff",
        "--name-only",
        "--no-renames",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=all",
        "-z",
        "HEAD",
        "--",
    )
    untracked = repo.run("ls-files", "-z", "--others", "--exclude-standard")
    if changed is None or untracked is None:
        raise OSError("git diff or git ls-files failed")
    names = (changed.stdout + untracked.stdout).decode("utf-8", errors="surrogateescape").split("\0")
    for name in filter(None, names):
        src, dst = top / name, tree / name
        if src.is_symlink() or src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                dst.unlink()
            if src.is_symlink():
                dst.symlink_to(os.readlink(src))
            else:
                shutil.copy2(src, dst)
        elif not src.exists():  # deleted in the working tree
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                dst.unlink()
