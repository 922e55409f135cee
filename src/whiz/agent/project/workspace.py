"""The project folder the agent works in: every path it names is confined to this folder."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Container, Iterator
from pathlib import Path, PurePosixPath
from typing import Protocol

from whiz.agent.errors import WhizAgentError
from whiz.environments.git import Repository
from whiz.environments.secret_paths import SecretFinder
from whiz.environments.secret_rules import SecretFiles

# Folders nobody wants the agent to list or search, git or not.
SKIP_DIRS = frozenset(
    {".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache"}
)
# How long one search for the hard links of secret files answers `is_secret`.
SECRET_SEARCH_TTL_S = 2.0
# Larger files are skipped by search: they are data or generated, and would flood the model's context.
SEARCH_MAX_BYTES = 1_000_000


class PathEscape(WhizAgentError):
    """A path that leads outside the workspace: '..', an absolute path, or a symlink that points out."""

    code = "path_escape"


class GitDirRefused(PathEscape):
    """A path into the repository's git folder. Git runs what is there (hooks, `core.fsmonitor` in its
    config) on the user's next git command, past every approval, and the config can hold tokens: so it
    is neither written nor read through the workspace. `.gitignore` and the like are ordinary files."""

    status = 403
    code = "git_dir_refused"


def is_git_name(name: str) -> bool:
    """Whether a path component names a git folder: `.git` in any case (case-insensitive file systems
    open `.GIT/config` as `.git/config`), with the trailing dots and spaces Windows drops, or its 8.3
    short name, the same spellings git itself refuses to check out."""
    bare = name.rstrip(". ").lower()
    return bare == ".git" or name.lower() == "git~1"


class FileAccess(Protocol):
    """Where the text of the workspace's files comes from and goes to, instead of the disk: an
    editor's buffers over ACP's `fs/*` (`whiz.acp.files`), so the agent sees and edits what the
    user has open, saved or not. Paths are absolute and already through `Workspace.resolve`."""

    def read_text(self, path: Path) -> str | None:
        """The file's text; None: read it from the disk."""
        ...

    def write_text(self, path: Path, text: str) -> bool:
        """Write the file's new text (OSError when that fails); False: write it to the disk."""
        ...


class Workspace:
    """A folder the agent may read and edit; `resolve` is the one gate every path goes through."""

    def __init__(self, root: Path, secrets: SecretFiles | None = None):
        self.root = Path(root).resolve()
        self.files: FileAccess | None = None
        """Where existing files are read and edited, where not on the disk (an editor's buffers)."""
        self.secrets = secrets or SecretFiles()
        """Which files look like secrets: they reach the model only as `secret_files` allows."""
        self._git_dirs = _linked_git_dirs(self.root)
        self._secret_finder = SecretFinder(self.secrets)
        self._secret_search: tuple[float, set[Path]] | None = None

    def resolve(self, rel: str) -> Path:
        """The real path of `rel` in the workspace (symlinks followed); PathEscape if it leads out."""
        if not rel or not rel.strip() or "\x00" in rel:
            raise PathEscape(f"Invalid path {rel!r}: give a file path relative to the project folder.")
        pure = PurePosixPath(rel.replace("\\", "/"))
        if pure.is_absolute() or rel.startswith("~") or re.match(r"^[A-Za-z]:", rel):
            raise PathEscape(
                f"Path {rel!r} is absolute; use a path relative to the project folder, e.g. 'src/app.py'."
            )
        if ".." in pure.parts:
            raise PathEscape(f"Path {rel!r} contains '..'; paths must stay inside the project folder.")
        if any(is_git_name(part) for part in pure.parts):
            raise GitDirRefused(
                f"Path {rel!r} is inside git's own folder (.git), which whiz never reads or changes; "
                "use git commands to look at the repository."
            )
        real = (self.root / pure).resolve()
        if not real.is_relative_to(self.root):
            raise PathEscape(f"Path {rel!r} is a symlink that leads outside the project folder; refused.")
        if self._in_git_dir(real):
            raise GitDirRefused(f"Path {rel!r} is a symlink into git's own folder (.git); refused.")
        return real

    def relative(self, path: Path) -> str:
        """The posix path of an absolute `path` relative to the root (for messages and listings)."""
        return path.relative_to(self.root).as_posix()

    def is_secret(self, rel: str) -> bool:
        """Whether `rel` looks like a secret (`SecretFiles`), by its own name, for a symlink by the
        name of the file it leads to, or as another name (a hard link) of a secret file."""
        if self.secrets.matches(rel):
            return True
        try:
            path = self.resolve(rel)
        except WhizAgentError:
            return False
        return self.secrets.matches(self.relative(path)) or self._other_name_of_a_secret(path)

    def _other_name_of_a_secret(self, path: Path) -> bool:
        """Whether `path`, a file with more than one name, is a secret file under another (a hard
        link). The search (`SecretFinder`, which tells the sandbox what to hide too) runs only for
        such files, which are rare, and its answer serves for `SECRET_SEARCH_TTL_S`: a listing of
        the workspace asks about every file in a row."""
        try:
            if not path.is_file() or path.stat().st_nlink < 2:
                return False
        except OSError:
            return False
        now = time.monotonic()
        if self._secret_search is None or now - self._secret_search[0] > SECRET_SEARCH_TTL_S:
            self._secret_search = (now, set(self._secret_finder.find(self.root)))
        return path in self._secret_search[1]

    def exists(self, rel: str) -> bool:
        """Whether `rel` names an existing file or folder inside the workspace."""
        return self.resolve(rel).exists()

    def read_text(self, rel: str) -> str:
        """The file's text, decoded as UTF-8 with its line endings kept as they are on disk."""
        path = self.resolve(rel)
        if path.is_dir():
            raise WhizAgentError(f"{rel} is a folder, not a file; list it instead of reading it.")
        if self.files is not None and path.is_file() and (text := self.files.read_text(path)) is not None:
            return text
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise WhizAgentError(f"File {rel} does not exist.") from None
        except OSError as exc:
            raise WhizAgentError(f"Cannot read {rel}: {exc.strerror or exc}.") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise WhizAgentError(f"{rel} is not a UTF-8 text file; it cannot be read or edited.") from None

    def list_files(self, under: str = ".", limit: int = 500) -> list[str]:
        """Files below `under` as sorted posix paths relative to the root, at most `limit` of them.

        Skips SKIP_DIRS and, where the workspace is in a git repository, what git ignores.
        """
        base = self.resolve(under)
        if not base.is_dir():
            raise WhizAgentError(f"{under} is not a folder.")
        found = self._git_files(base)
        if found is None:
            found = self._walk_files(base)
        kept = []
        for path in sorted(found):
            rel = self.relative(path)
            if SKIP_DIRS.isdisjoint(PurePosixPath(rel).parts[:-1]) and self._allowed(path) and path.is_file():
                kept.append(rel)
        return kept[:limit]

    def python_sources(
        self, *, limit: int, max_chars: int, skip: Container[str] = ()
    ) -> Iterator[tuple[str, str]]:
        """(path, text) of the workspace's Python files, at most `limit` of them, leaving out those
        in `skip`, those longer than `max_chars`, those that cannot be read as text, and secret ones
        (`is_secret`): what code indexes (definitions, functions) read, where one odd file must not
        stop the rest. What an index holds reaches the model (a localized function is sent to be
        rewritten), so a file the user marked secret is never in one."""
        try:
            listed = self.list_files(".", limit=limit)
            paths = [p for p in listed if p.endswith(".py") and p not in skip and not self.is_secret(p)]
        except (OSError, WhizAgentError):
            return
        for path in paths:
            try:
                text = self.read_text(path)
            except (OSError, UnicodeDecodeError, WhizAgentError):
                continue
            if len(text) <= max_chars:
                yield path, text

    def search(self, pattern: str, under: str = ".", limit: int = 100) -> list[tuple[str, int, str]]:
        """Lines matching `pattern` as (path, line_no from 1, line); the pattern is a regular expression,
        or plain text where it is not a valid one (models often write `foo(` meaning the text)."""
        if not pattern:
            raise WhizAgentError("The search pattern is empty; give the text to look for.")
        try:
            regex = re.compile(pattern)
        except re.error:
            regex = re.compile(re.escape(pattern))
        hits: list[tuple[str, int, str]] = []
        for rel in self.list_files(under, limit=100_000):
            path = self.root / rel
            try:
                if path.stat().st_size > SEARCH_MAX_BYTES:
                    continue
                text = path.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            for line_no, line in enumerate(text.splitlines(), start=1):
                if regex.search(line):
                    hits.append((rel, line_no, line))
                    if len(hits) >= limit:
                        return hits
        return hits

    def _allowed(self, path: Path) -> bool:
        real = path.resolve()
        return real.is_relative_to(self.root) and not self._in_git_dir(real)

    def _in_git_dir(self, real: Path) -> bool:
        """Whether a real (symlinks followed) path inside the root lies in a git folder."""
        if any(is_git_name(part) for part in real.relative_to(self.root).parts):
            return True
        return any(real.is_relative_to(git_dir) for git_dir in self._git_dirs)

    def _git_files(self, base: Path) -> list[Path] | None:
        """Tracked and untracked-but-not-ignored files from git, or None where the workspace's root
        is not the top of a repository (then a plain walk lists them) or git says no.

        git is asked about the root's own `.git` alone, never about a folder found below it: a
        folder the model or a cloned repository made can look like a git folder, and git would run
        what its config names (see environments/git.py)."""
        repo = Repository.at(self.root)
        if repo is None:
            return None
        under = [] if base == self.root else ["--", self.relative(base)]
        done = repo.run("ls-files", "-z", "--cached", "--others", "--exclude-standard", *under, timeout=30)
        if done is None:
            return None
        names = done.stdout.decode("utf-8", errors="surrogateescape").split("\0")
        return [self.root / name for name in names if name]

    def _walk_files(self, base: Path) -> list[Path]:
        found = []
        for folder, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            found.extend(Path(folder) / name for name in files)
        return found


def _linked_git_dirs(root: Path) -> list[Path]:
    """The git folder a `.git` *file* at the root points to (`gitdir: ...`, as in a worktree or a
    submodule), where it lies inside the root under another name; a `.git` folder needs no entry,
    since every path through it has a `.git` component."""
    try:
        text = (root / ".git").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    if not text.startswith("gitdir:"):
        return []
    target = (root / text.removeprefix("gitdir:").strip()).resolve()
    return [target] if target.is_relative_to(root) else []
