"""`.git` stays read-only inside a writable workspace, whether or not it exists when a command starts.

A writable `.git` lets a command plant a hook or `core.fsmonitor` that git then runs outside the
sandbox (whiz's own git, or the user's). So:

- an existing `.git` (folder, or a worktree's `.git` file) is bound read-only over itself; a mount
  point cannot be removed or renamed from inside, so it cannot be swapped for a writable one. The
  folder a `.git` file names (`gitdir:`, and its `commondir`) is bound read-only too: inside a
  writable folder so that it cannot be changed, elsewhere (a home folder the sandbox hides) so that
  git still works in a worktree, but there only when that folder names this worktree back (its
  `gitdir` file): a hostile repository's `.git` file could name any folder.
- a missing `.git` gets an empty read-only folder in its place (`git init` fails). Bubblewrap
  creates the mount point in the real workspace, so whiz removes it when the command ends, unless
  another confined command still runs there: each one holds a shared lock on the workspace for its
  run (`WorkspaceLock`), and the empty folder goes only with an exclusive one. Removing a folder
  that is a mount point elsewhere would detach that mount in the other command's namespace.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import platformdirs


def git_mounts(root: Path, writable: Sequence[Path], *, plant: bool) -> list[str]:
    """The bwrap arguments that keep `root`'s `.git` read-only; with `plant`, a missing one becomes
    an empty read-only folder. `writable`: every folder the command may write (the gitdir a `.git`
    file names is protected when it lies in one)."""
    git = root / ".git"
    if not os.path.lexists(git):
        return ["--tmpfs", str(git), "--remount-ro", str(git)] if plant else []
    if not git.exists():
        return []  # a dangling link: nothing there to protect or to bind
    args = ["--ro-bind", str(git), str(git)]
    real = git.resolve()
    if real != git:
        args += ["--ro-bind", str(real), str(real)]
    linked = _linked_gitdirs(real)
    if linked and not _names_back(linked[0], git):
        linked = [g for g in linked if any(g.is_relative_to(w) for w in writable)]
    for gitdir in linked:
        args += ["--ro-bind", str(gitdir), str(gitdir)]
    return args


def _names_back(gitdir: Path, git: Path) -> bool:
    """Whether a worktree's git folder names `git` (the worktree's `.git` file) as its own, as
    `git worktree add` writes it."""
    try:
        named = (gitdir / "gitdir").read_text(errors="replace").strip()
    except OSError:
        return False
    return bool(named) and os.path.realpath(named) == os.path.realpath(git)


def nested_repositories(root: Path, depth: int = 3, budget: int = 2000) -> list[Path]:
    """Folders inside `root`, down to `depth` levels, that hold a `.git` of their own (a vendored
    clone, a second project): their `.git` is kept read-only as the workspace's is. Hidden and
    dependency folders are not searched, and the search stops after `budget` folders, so that a
    huge tree costs each command milliseconds, not seconds."""
    found: list[Path] = []
    level = [str(root)]
    for _ in range(depth):
        below: list[str] = []
        for folder in level:
            try:
                with os.scandir(folder) as entries:
                    subfolders = [
                        e.path
                        for e in entries
                        if e.is_dir(follow_symlinks=False)
                        and not e.name.startswith(".")
                        and e.name not in SKIPPED
                    ]
            except OSError:
                continue
            for path in subfolders:
                if os.path.lexists(os.path.join(path, ".git")):
                    found.append(Path(path))
            below += subfolders
            if len(below) > budget:
                return found
        level = below
    return found


# Not searched for nested repositories: large, and nobody works inside them.
SKIPPED = frozenset({"node_modules", "venv", "__pycache__", "__pypackages__", "site-packages"})


def _linked_gitdirs(git: Path) -> list[Path]:
    """The folders a `.git` file leads to: its `gitdir:` and that folder's `commondir`."""
    if not git.is_file():
        return []
    try:
        line = git.read_text(errors="replace").strip()
    except OSError:
        return []
    if not line.startswith("gitdir:"):
        return []
    gitdir = (git.parent / line.removeprefix("gitdir:").strip()).resolve()
    found = [gitdir] if gitdir.is_dir() else []
    with contextlib.suppress(OSError):
        common = (gitdir / "commondir").read_text().strip()
        if common and (gitdir / common).resolve().is_dir():
            found.append((gitdir / common).resolve())
    return found


class WorkspaceLock:
    """A shared lock on a workspace, held while one confined command runs there (see the module)."""

    def __init__(self, root: Path, folder: Path | None = None):
        self.root = root
        self.fd: int | None = None
        name = hashlib.sha256(str(root).encode()).hexdigest()[:32]
        for candidate in [folder] if folder else _lock_folders():
            try:
                candidate.mkdir(parents=True, exist_ok=True, mode=0o700)
                if candidate.is_symlink() or candidate.stat().st_uid != os.geteuid():
                    continue  # someone else's, in a shared temp folder
                self.fd = os.open(candidate / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                break
            except OSError:
                continue
        # Without a lock (nowhere to keep one) the empty `.git` stays: litter, but safe.
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_SH)

    def release_and_tidy(self) -> None:
        """Let go; if no other confined command runs in the workspace, remove an empty `.git` (the
        mount point a planted one left). Called once, when the command ended."""
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            with contextlib.suppress(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                git = self.root / ".git"
                if git.is_dir() and not git.is_symlink():
                    with contextlib.suppress(OSError):
                        git.rmdir()  # only an empty folder goes
        finally:
            os.close(fd)


def _lock_folders() -> list[Path]:
    """Where the locks may live: whiz's cache, else a folder of this user's in the temp folder
    (a read-only home, as some CI runners have)."""
    return [
        Path(platformdirs.user_cache_dir("whiz")) / "sandbox-locks",
        Path(tempfile.gettempdir()) / f"whiz-sandbox-locks-{os.geteuid()}",
    ]
