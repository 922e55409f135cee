"""Which files of a workspace look like secrets, and where they are.

One rule set serves both sides: the agent keeps such files from the model (`agent/secret_files.py`),
and the sandbox hides them from the commands the model writes (`sandbox.py`), since a command
that may read `.env` can hand it to the model in any encoding (`cat .env | base64`).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath

from whiz.environments.dependencies import ENVIRONMENT_MARKERS, WORKSPACE_DEPENDENCY_DIRS

SECRET_PATTERNS = (
    # Environment files (dotenv, direnv, docker compose's `*.env`), but see PUBLIC_SUFFIXES.
    ".env*",
    "*.env",
    # Private keys and key stores. SSH keys (`id_rsa`, `id_ed25519`) are `_SSH_KEY`.
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.ppk",
    # Tokens and passwords of package registries, git, databases and web servers.
    ".netrc",
    "_netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".git-credentials",
    ".htpasswd",
    ".dockercfg",
    ".docker/config.json",
    "kubeconfig*",
    ".kube/config",
    # Credential and secret stores by name (but see `NAMES_CODE_MAY_HAVE`).
    "*credentials*",
    "client_secret*",
    "secrets",
    "secrets.*",
    "*.secret",
    "secrets/*",
    ".secrets/*",
    # Terraform's state and variables.
    "*.tfstate",
    "*.tfstate.*",
    "*.tfvars",
    # Whole folders of them, where a project keeps a copy.
    ".ssh/*",
    ".aws/*",
    ".gnupg/*",
)
"""Globs (case-insensitive) of files that look like secrets: one without '/' matches a file's
name, one with '/' its path (or the end of it)."""

PUBLIC_SUFFIXES = (".example", ".sample", ".template", ".dist", ".pub")
"""Templates meant to be committed (`.env.example`: the keys, with made-up values) and public keys
(`id_rsa.pub`, `server.key.pub`) are not secrets, and the model needs to see which keys exist."""

_SSH_KEY = re.compile(r"id_[a-z0-9_-]+")
"""`id_rsa`, `id_ed25519`, `id_ecdsa_sk`, `id_deploy`: an SSH key has no extension, while a module
like `id_utils.py` has one."""

NAMES_CODE_MAY_HAVE = frozenset({"*credentials*", "secrets", "secrets.*", "secrets/*", ".secrets/*"})
"""Patterns a source file matched by its name alone is no secret for: see `_CODE`."""
_CODE = frozenset(
    {".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".kt", ".rb",
     ".php", ".cs", ".c", ".h", ".cc", ".cpp", ".hpp", ".swift", ".scala", ".ex", ".exs", ".md", ".rst",
     ".html", ".css"}
)  # fmt: skip
"""`credentials.py`, `secrets.ts` and `secrets/manager.go` are usually code (that reads credentials
from elsewhere), and a model that may not read them cannot work on them: add them to the setting
where yours hold values."""

_ANY_FILE = "\x00"
"""A file name no built-in pattern matches by name: a folder whose `folder/<this>` matches holds
nothing but secrets (`.aws/`, `secrets/`)."""


@dataclass(frozen=True)
class SecretFiles:
    """Which files of a workspace look like secrets: `SECRET_PATTERNS`, and the user's own."""

    extra: tuple[str, ...] = field(default=())
    """More globs, as in SECRET_PATTERNS (`config/prod.yaml`, `*.cfg`); one that starts with '!'
    takes a file back out (`!.env.test` for a test env file with no real values). From
    `--secret-file` or WHIZ_SECRET_FILES."""

    def matches(self, path: str) -> bool:
        """Whether the workspace file `path` (posix, relative to the root) looks like a secret."""
        rel = path.replace("\\", "/").removeprefix("./").lower()
        name = PurePosixPath(rel).name
        rules = self._rules
        if rules.kept_out(rel):
            return False
        if rules.added(rel):
            return True
        if name.endswith(PUBLIC_SUFFIXES):
            return False
        if _SSH_KEY.fullmatch(name):
            return True
        if PurePosixPath(name).suffix in _CODE:
            return rules.builtin_for_code(rel)
        return rules.builtin(rel)

    def holds_only_secrets(self, folder: str) -> bool:
        """Whether everything in the workspace folder `folder` looks like a secret by its path
        (`.aws`, `secrets`), and no '!' glob takes a file back out: it may be hidden whole."""
        return not self._rules.has_exceptions and self.matches(f"{folder}/{_ANY_FILE}")

    @cached_property
    def _rules(self) -> _Compiled:
        """The globs compiled: a workspace walk asks about every file, and one regular expression
        per group answers in one pass instead of one glob at a time."""
        return _Compiled(
            kept_out=_globs([p[1:].lower() for p in self.extra if p.startswith("!")]),
            added=_globs([p.lower() for p in self.extra if not p.startswith("!")]),
            builtin=_globs(SECRET_PATTERNS),
            builtin_for_code=_globs([p for p in SECRET_PATTERNS if p not in NAMES_CODE_MAY_HAVE]),
            has_exceptions=any(p.startswith("!") for p in self.extra),
        )


@dataclass(frozen=True)
class _Compiled:
    kept_out: _Globs
    added: _Globs
    builtin: _Globs
    builtin_for_code: _Globs
    has_exceptions: bool


class _Globs:
    """Globs as `SECRET_PATTERNS` reads them (no '/': the name; with '/': the path or its end)."""

    def __init__(self, names: re.Pattern | None, paths: re.Pattern | None):
        self.names, self.paths = names, paths

    def __call__(self, rel: str) -> bool:
        if self.names is not None and self.names.match(PurePosixPath(rel).name):
            return True
        return self.paths is not None and self.paths.match(rel) is not None


def _globs(patterns: Iterable[str]) -> _Globs:
    names = [p for p in patterns if "/" not in p]
    paths = [q for p in patterns if "/" in p for q in (p, "*/" + p)]
    return _Globs(_regex(names), _regex(paths))


def _regex(patterns: list[str]) -> re.Pattern | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


# --- where they are -----------------------------------------------------------------------------------

WALK_BUDGET = 5000
"""Folders `secret_paths` looks in, breadth first (the shallow ones, where `.env` files live,
before the deep ones): a monorepo costs each command tens of milliseconds, not seconds."""

NOT_SEARCHED = WORKSPACE_DEPENDENCY_DIRS | {"__pycache__", "site-packages", ".mypy_cache", ".pytest_cache"}
"""Installed packages ship `*.pem` certificate bundles and test keys nobody's secrets: hiding them
would break the tools. Their own contents are the dependency folders' business (`dependencies.py`)."""


def secret_paths(
    root: Path, rules: SecretFiles, *, shown: Collection[str] = (), budget: int = WALK_BUDGET
) -> list[Path]:
    """The real paths inside `root` that a command must not read: each secret-looking file, each
    folder that holds nothing else (hidden whole), the file a secret-looking link leads to, a link's
    target that looks like a secret, and every hard link of a secret file under another name.
    `shown`: paths relative to `root` (real ones) the user let through. `.git` and dependency
    folders are not searched, nor anything past the first `budget` folders."""
    root = Path(os.path.realpath(root))
    walk = _Walk(root, rules, set(shown))
    walk.run(budget)
    return walk.hidden_paths()


class _Walk:
    """One search of a workspace for `secret_paths`."""

    def __init__(self, root: Path, rules: SecretFiles, shown: set[str]):
        self.root, self.rules, self.shown = root, rules, shown
        self.hidden: dict[str, bool] = {}
        """Real path -> whether it is a folder."""
        self.files: list[str] = []
        """Every other file seen: for the hard-link check, and a folder holding one is not
        hidden whole."""
        self.secret_folders: list[str] = []
        """Folders whose every file would look like a secret by its path (`.aws/`, `secrets/`)."""

    def run(self, budget: int) -> None:
        level, seen = [str(self.root)], 0
        while level and seen < budget:
            below: list[str] = []
            for folder in level:
                below += self._look_in(folder)
            seen += len(level)
            level = below[: max(0, budget - seen)]
        self._hard_links()
        self._whole_folders()

    def _look_in(self, folder: str) -> list[str]:
        subfolders = []
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    rel = self._rel(entry.path)
                    if entry.is_symlink():
                        self._link(entry.path, rel)
                    elif entry.is_dir(follow_symlinks=False):
                        if self._searched(entry):
                            subfolders.append(entry.path)
                    elif self.rules.matches(rel):
                        self._hide(entry.path, folder=False)
                    else:
                        self.files.append(entry.path)
        except OSError:
            return []
        return subfolders

    def _searched(self, entry: os.DirEntry) -> bool:
        """Whether to look inside the folder `entry`."""
        name = entry.name.lower()
        if name.rstrip(". ") == ".git" or name in NOT_SEARCHED:
            return False
        if any(os.path.lexists(os.path.join(entry.path, m)) for m in ENVIRONMENT_MARKERS):
            return False
        if self.rules.holds_only_secrets(self._rel(entry.path)):
            self.secret_folders.append(entry.path)
        return True

    def _link(self, path: str, rel: str) -> None:
        """A symlink: what it leads to is hidden where the link or its target looks like a secret,
        and the target lies in the workspace (one outside was never the workspace's to hide; the
        workspace itself stays, or a link `.env -> .` would empty it)."""
        real = os.path.realpath(path)
        if real == str(self.root) or not Path(real).is_relative_to(self.root) or not os.path.exists(real):
            return
        if self.rules.matches(rel) or self.rules.matches(self._rel(real)):
            self._hide(real, folder=os.path.isdir(real))

    def _hide(self, path: str, *, folder: bool) -> None:
        if self._rel(path) in self.shown:
            self.files.append(path)
        else:
            self.hidden[path] = folder

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
        for path in self.files:
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
            inside = folder + "/"
            if any(f.startswith(inside) for f in self.files if f not in self.hidden):
                continue
            self.hidden = {p: d for p, d in self.hidden.items() if not p.startswith(inside)}
            self.hidden[folder] = True

    def hidden_paths(self) -> list[Path]:
        paths = sorted(Path(p) for p in self.hidden)
        return [p for p in paths if not any(o != p and p.is_relative_to(o) for o in paths)]

    def _rel(self, path: str) -> str:
        return os.path.relpath(path, self.root).replace(os.sep, "/")
