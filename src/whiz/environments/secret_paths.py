"""Where a workspace's secret files are, so that the sandbox can hide them from every command.

The search runs before each command (a secret file may have appeared since the last one), so a
`SecretFinder` remembers what each folder held, by the folder's modification time (a name added,
removed or renamed in a folder changes it), and lists again only the folders that changed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from whiz.environments.dependencies import ENVIRONMENT_MARKERS, WORKSPACE_DEPENDENCY_DIRS
from whiz.environments.errors import SandboxUnavailable
from whiz.environments.secret_rules import SecretFiles

WALK_BUDGET = 20_000
"""Folders searched, breadth first (the shallow ones, where `.env` files live, first). A first
search of a tree that large takes a second or two; the next ones list only what changed."""

SETTLED_NS = 1_000_000_000
"""A listing is reused only for a folder unchanged for this long: file times come from a coarse
clock (milliseconds), so a name added right after a listing can leave the time as it was."""

NOT_SEARCHED = WORKSPACE_DEPENDENCY_DIRS | {"__pycache__", "site-packages", ".mypy_cache", ".pytest_cache"}
"""Installed packages ship `*.pem` certificate bundles and test keys nobody's secrets: hiding them
would break the tools. Their own contents are the dependency folders' business (`dependencies.py`)."""


MAX_HIDDEN = 1000
"""Mounts one command's secret files may take (see `_Search._fewer`)."""


class TooManySecrets(SandboxUnavailable):
    """More secret files than the sandbox can hide, in folders it cannot hide whole."""


REPOSITORY_LEVELS = 8
"""How far above a workspace `search_root` looks for the repository it belongs to."""


def search_root(workspace: Path, homes: Collection[Path] = ()) -> Path:
    """Where to look for the secret files a command in `workspace` must not read: the workspace,
    or where it is a sub-folder of a git repository (a monorepo's `backend/`), that repository's
    top, whose other secret files (`../.env`) a command could read as well. Never a home folder or
    `/`: a dotfiles repository would make every command search the whole home."""
    workspace = Path(os.path.realpath(workspace))
    folder = workspace
    for _ in range(REPOSITORY_LEVELS):
        if os.path.lexists(folder / ".git"):
            return workspace if folder in homes or folder == folder.parent else folder
        if folder == folder.parent:
            break
        folder = folder.parent
    return workspace


def secret_paths(
    root: Path, rules: SecretFiles, *, shown: Collection[str] = (), budget: int = WALK_BUDGET
) -> list[Path]:
    """`SecretFinder.find` once."""
    return SecretFinder(rules, budget).find(root, shown)


@dataclass
class _Listing:
    """What one folder held, as far as secrets go (absolute paths)."""

    secrets: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    """Files that are not secrets: for the hard-link check, and a folder holding one is not
    hidden whole."""
    links: list[str] = field(default_factory=list)
    subfolders: list[str] = field(default_factory=list)
    """Those to search."""
    only_secrets: bool = False
    """Whether every file this folder could hold looks like a secret by its path (`.aws/`)."""


class SecretFinder:
    """Finds the secret files of a workspace under one rule set, again and again."""

    def __init__(self, rules: SecretFiles, budget: int = WALK_BUDGET):
        self.rules = rules
        self.budget = budget
        self._listings: dict[str, tuple[int, _Listing]] = {}

    def find(self, root: Path, shown: Collection[str] = (), workspace: Path | None = None) -> list[Path]:
        """The real paths inside `root` that a command must not read: each secret-looking file,
        each folder that holds nothing else (to hide whole), the file a secret-looking link leads
        to, a link's target that looks like a secret, and a secret file's other names (hard links).
        `workspace` (default: `root`), a folder inside `root`: its files are judged by their paths
        relative to it, as the agent judges them, the others relative to `root`. `shown`: paths
        relative to the workspace (real ones) the user let through. `.git` and dependency folders
        are not searched, nor anything past the first `budget` folders. Call it with the same
        `root` and `workspace` each time: what a folder held is remembered as judged then."""
        root = Path(os.path.realpath(root))
        search = _Search(root, Path(os.path.realpath(workspace or root)), self.rules, set(shown))
        level, seen = [str(root)], 0
        while level and seen < self.budget:
            below: list[str] = []
            for folder in level:
                listing = self._listing(folder, search)
                if listing is not None:
                    search.take(folder, listing)
                    below += listing.subfolders
            seen += len(level)
            level = below[: max(0, self.budget - seen)]
        return search.result()

    def _listing(self, folder: str, search: _Search) -> _Listing | None:
        try:
            mtime_ns = os.stat(folder, follow_symlinks=False).st_mtime_ns
        except OSError:
            return None
        cached = self._listings.get(folder)
        # A folder changed within the clock's last tick may change again with the same time.
        if cached is not None and cached[0] == mtime_ns and mtime_ns < time.time_ns() - SETTLED_NS:
            return cached[1]
        listing = _Listing()
        listing.only_secrets = folder not in search.tops and self.rules.holds_only_secrets(search.rel(folder))
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        listing.links.append(entry.path)
                    elif entry.is_dir(follow_symlinks=False):
                        if _searched(entry):
                            listing.subfolders.append(entry.path)
                    elif self.rules.matches(search.rel(entry.path)):
                        listing.secrets.append(entry.path)
                    else:
                        listing.others.append(entry.path)
        except OSError:
            return None
        self._listings[folder] = (mtime_ns, listing)
        return listing


def _below_any(path: str, folders: set[str]) -> bool:
    """Whether a folder of `folders` holds `path` (hidden with it already)."""
    parent = path.rpartition("/")[0]
    while parent:
        if parent in folders:
            return True
        parent = parent.rpartition("/")[0]
    return False


def _searched(entry: os.DirEntry) -> bool:
    name = entry.name.lower()
    if name.rstrip(". ") == ".git" or name in NOT_SEARCHED:
        return False
    return not any(os.path.lexists(os.path.join(entry.path, m)) for m in ENVIRONMENT_MARKERS)


class _Search:
    """One search's findings."""

    def __init__(self, root: Path, workspace: Path, rules: SecretFiles, shown: set[str]):
        self.root, self.rules, self.shown = root, rules, shown
        self.tops = {str(root), str(workspace)}
        """Never hidden whole: a workspace called `secrets` is where the user works."""
        self.prefix = str(root).rstrip("/") + "/"
        self.prefixes = [str(workspace).rstrip("/") + "/", self.prefix]
        """The workspace's first: a file inside it is judged relative to it."""
        self.hidden: dict[str, bool] = {}
        """Real path -> whether it is a folder."""
        self.listings: list[_Listing] = []
        self.let_through: list[str] = []
        """Secret files the user let through: no longer secrets, for this search."""
        self.secret_folders: list[str] = []

    def take(self, folder: str, listing: _Listing) -> None:
        self.listings.append(listing)
        if listing.only_secrets:
            self.secret_folders.append(folder)
        for path in listing.secrets:
            self._hide(path, folder=False)
        for link in listing.links:
            self._link(link)

    def others(self) -> Iterator[str]:
        """The files seen that are not hidden."""
        yield from self.let_through
        for listing in self.listings:
            yield from listing.others

    def _link(self, path: str) -> None:
        """What a link leads to is hidden where the link or its target looks like a secret, and
        the target lies in the workspace (one outside was never the workspace's to hide; the
        workspace itself stays, or a link `.env -> .` would empty it)."""
        real = os.path.realpath(path)
        if self.holds_a_top(real) or not real.startswith(self.prefix) or not os.path.exists(real):
            return
        if self.rules.matches(self.rel(path)) or self.rules.matches(self.rel(real)):
            self._hide(real, folder=os.path.isdir(real))

    def _hide(self, path: str, *, folder: bool) -> None:
        if path.startswith(self.prefixes[0]) and self.rel(path) in self.shown:
            self.let_through.append(path)
        else:
            self.hidden[path] = folder

    def result(self) -> list[Path]:
        self._hard_links()
        self._whole_folders()
        if len(self.hidden) > MAX_HIDDEN:
            self._fewer()
        folders = {p for p, folder in self.hidden.items() if folder}
        return [Path(p) for p in sorted(self.hidden) if not _below_any(p, folders)]

    def _fewer(self) -> None:
        """Hide the folders that hold the most secret files whole, until no more than MAX_HIDDEN
        mounts are left: bubblewrap takes a few thousand arguments at most. A test fixture folder
        of 3,000 keys becomes one empty folder; the workspace itself is never hidden."""
        counts: dict[str, int] = {}
        for path in self.hidden:
            parent = path.rpartition("/")[0]
            if not self.holds_a_top(parent):
                counts[parent] = counts.get(parent, 0) + 1
        left = len(self.hidden)
        for parent, count in sorted(counts.items(), key=lambda item: -item[1]):
            if left <= MAX_HIDDEN:
                return
            self.hidden = {p: d for p, d in self.hidden.items() if p.rpartition("/")[0] != parent}
            self.hidden[parent] = True
            left -= count - 1
        if len(self.hidden) > MAX_HIDDEN:
            raise TooManySecrets(
                f"{len(self.hidden)} files that look like secrets lie directly in {self.root}: too "
                "many to hide one by one; take the ones that are not secrets out with "
                "--secret-file '!GLOB', or let commands read them with --allow-secret-reads"
            )

    def _hard_links(self) -> None:
        """A secret file with more than one name (`ln .env notes.txt`, made before the command)
        is hidden under each of them."""
        inodes = set()
        for path, folder in self.hidden.items():
            try:
                stat = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if not folder and stat.st_nlink > 1:
                inodes.add((stat.st_dev, stat.st_ino))
        if not inodes:
            return
        for path in list(self.others()):
            try:
                stat = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            if (stat.st_dev, stat.st_ino) in inodes:
                self.hidden[path] = False

    def _whole_folders(self) -> None:
        """A folder of secrets and nothing else is hidden whole (an empty folder, rather than one
        mount per file): then what a command adds there is out of sight too."""
        for folder in self.secret_folders:
            if self.holds_a_top(folder):
                continue
            inside = folder + "/"
            if any(f.startswith(inside) for f in self.others() if f not in self.hidden):
                continue
            self.hidden = {p: d for p, d in self.hidden.items() if not p.startswith(inside)}
            self.hidden[folder] = True

    def holds_a_top(self, path: str) -> bool:
        """Whether `path` is the workspace, the search's root, or a folder above one of them:
        hidden, it would hide the workspace (a link `.env -> ..` must not do that)."""
        return any(top == path or top.startswith(path.rstrip("/") + "/") for top in self.tops)

    def rel(self, path: str) -> str:
        # Every path here is below the root, built by joining names onto it: no pathlib needed.
        for prefix in self.prefixes:
            if path.startswith(prefix):
                return path[len(prefix) :]
        return os.path.relpath(path, self.root)
