"""Which files of a workspace look like secrets: one rule set for both sides.

The agent keeps such files from the model (`agent/project/secret_files.py`), and the sandbox hides them
from the commands the model writes (`secret_paths.py` finds them), since a command that may read
`.env` can hand it to the model in any encoding (`cat .env | base64`).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

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
        # Plain string work, not pathlib: a workspace walk asks this about every file.
        rel = path.replace("\\", "/").removeprefix("./").lower()
        name = rel.rpartition("/")[2]
        rules = self._rules
        if rules.kept_out(rel, name):
            return False
        if rules.added(rel, name):
            return True
        if name.endswith(PUBLIC_SUFFIXES):
            return False
        if _SSH_KEY.fullmatch(name):
            return True
        if os.path.splitext(name)[1] in _CODE:
            return rules.builtin_for_code(rel, name)
        return rules.builtin(rel, name)

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

    def __call__(self, rel: str, name: str) -> bool:
        if self.names is not None and self.names.match(name):
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
