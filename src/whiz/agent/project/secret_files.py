"""Files that look like secrets, and what the model sees of one nobody let it read.

A workspace's `.env`, private keys and credential files hold values that must not leave the
machine: the model may run on another host (`--base-url`), and what it is sent is kept in the
session database. So such a file is never attached to a prompt or mapped with its contents; a
READ of it asks the user, in every approval mode; and where the user says no (or no one can be
asked), the model sees the file masked: its keys, each value replaced by `MASK`. Values of such
files that turn up anyway (a command's output, an edit's error message) are masked there too.

Which files look like secrets is `environments/secret_paths.py`'s rule set, shared with the
sandbox, which hides the same files from the commands the model writes. The user names more files
in a setting (`SecretFiles.extra`), and lets the model read one by naming it in a message or
approving its READ (`SecretGate`); a file let through is let through to commands as well.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from whiz.agent.errors import WhizAgentError
from whiz.environments.secret_rules import SECRET_PATTERNS, SecretFiles

__all__ = ["MASK", "SECRET_PATTERNS", "SecretFiles", "SecretGate", "mask", "redact", "secret_values"]

if TYPE_CHECKING:
    from whiz.agent.project.workspace import Workspace
    from whiz.environments import Environment
    from whiz.environments.sandbox import SandboxOptions

MASK = "…"
"""What stands for a hidden value."""

# --- what the model sees of a withheld file ---------------------------------------------------------

# `KEY=value`, `export KEY=value`, `key: value` (YAML, INI with ':'), `"key": value` (JSON).
_ASSIGNMENT = re.compile(
    r"""^(?P<key>\s*(?:export\s+)?(?P<q>["']?)(?P<name>[A-Za-z_][\w.-]{0,63})(?P=q)\s*(?:=|:)[ \t]*)"""
    r"""(?P<value>.*?)(?P<end>,?\s*)$"""
)
_SECTION = re.compile(r"^\s*\[[\w .:\"'-]{1,64}\]\s*$")
_COMMENT = re.compile(r"^(\s*)(#|;|//)")
_STRUCTURE = frozenset({"", "{", "[", "{}", "[]", '""', "''", "|", ">", "|-", ">-"})
"""Values that open a nested block or are empty: shown, since they hide nothing."""
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY[A-Z0-9 ]*)-----.*?(?:-----END \1-----|\Z)", re.DOTALL)


def mask(text: str) -> str:
    """`text` with every value hidden: `KEY=value` becomes `KEY=…` (quotes and JSON's commas
    kept), section headers (`[default]`) and blank lines stay, every other line (a comment, a
    key's body, a line of a multi-line value) becomes `…` at its indent."""
    out = []
    in_block = False
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        newline = line[len(body) :]
        if "-----BEGIN" in body:
            in_block = True
        out.append(_mask_line(body, in_block) + newline)
        if "-----END" in body:
            in_block = False
    return "".join(out)


def _mask_line(line: str, in_block: bool) -> str:
    if not line.strip() or _SECTION.match(line):
        return line
    indent = line[: len(line) - len(line.lstrip())]
    if in_block:
        return indent + MASK
    if comment := _COMMENT.match(line):
        return f"{comment.group(1)}{comment.group(2)} {MASK}"
    found = _ASSIGNMENT.match(line)
    if found is None or _looks_encoded(found):
        return indent + MASK
    value = found.group("value").strip()
    if value in _STRUCTURE:
        return line
    return found.group("key") + MASK + found.group("end").rstrip()


def _looks_encoded(found: re.Match) -> bool:
    """Whether a line read as `NAME=` with no value (or only '=') is base64 (a key's body, its
    padding taken for the separator): shown as `NAME=`, it would give the NAME part away. An
    environment variable's name is upper case."""
    value = found.group("value").strip()
    return value.strip("=") == "" and "=" in found.group("key") and not found.group("name").isupper()


# --- values that must not turn up elsewhere -----------------------------------------------------------

MIN_VALUE_CHARS = 8
"""Shorter values (`PORT=5432`, `DEBUG=true`) are mostly not secrets, and masking them wherever
they appear in a command's output would garble it; but see MIN_SECRET_CHARS."""
MIN_SECRET_CHARS = 4
"""The shortest value hidden where its name says it is a secret (`DB_PASSWORD=hunter2`); one
shorter than MIN_VALUE_CHARS only as a whole word (`pass` stays in "passed")."""
_URL_PASSWORD = re.compile(r"://[^/\s:@]+:([^@\s/]+)@")
_SECRET_NAME = re.compile(r"pass|pwd|secret|token|key|auth|credential|private|cookie|session|salt", re.I)


def secret_values(text: str) -> set[str]:
    """The values of a secret file that are worth hiding wherever they appear: each `KEY=value`'s
    value (quotes off) of `MIN_VALUE_CHARS` or more that is not a plain word, or of
    `MIN_SECRET_CHARS` or more where the name says secret (`_SECRET_NAME`), and each password in
    a URL (`postgres://app:PASSWORD@db/app`)."""
    values: set[str] = set()
    for line in text.splitlines():
        found = _ASSIGNMENT.match(line)
        if found is None:
            continue
        value = found.group("value").strip().strip("\"'")
        if _worth_hiding(found.group("name"), value):
            values.add(value)
        values.update(p for p in _URL_PASSWORD.findall(value) if len(p) >= MIN_SECRET_CHARS)
    return values


def _worth_hiding(name: str, value: str) -> bool:
    if len(value) >= MIN_VALUE_CHARS and not (value.isalpha() and len(value) < 16):
        return True
    return len(value) >= MIN_SECRET_CHARS and _SECRET_NAME.search(name) is not None


def holds_private_key(text: str) -> bool:
    """Whether `text` holds a private key block (`-----BEGIN ... PRIVATE KEY-----`), whatever its
    file is called: such a file is a secret too."""
    return _PEM.search(text) is not None


def redact(text: str, values: set[str]) -> str:
    """`text` with each of `values` (longest first) and every private key block replaced by MASK."""
    text = _PEM.sub(lambda m: f"-----BEGIN {m.group(1)}-----{MASK}-----END {m.group(1)}-----", text)
    for value in sorted(values, key=len, reverse=True):
        if len(value) >= MIN_VALUE_CHARS:
            text = text.replace(value, MASK)
        else:
            text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", MASK, text)
    return text


# --- who may see what ---------------------------------------------------------------------------------


class SecretGate:
    """The secret-looking files of one workspace, and those of them the model may see: the files
    the user named in a message, and those whose READ the user approved. One per agent."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self.granted: set[str] = set()
        self._values: dict[str, tuple[tuple[int, int], set[str]]] = {}
        """Per secret file, its (mtime_ns, size) when read and the values found in it."""

    def environment(self, sandbox: SandboxOptions, timeout_s: float | None) -> Environment:
        """Where the agent's commands run: confined as `sandbox` says, with the secret files the
        model may not see hidden by the workspace's own rules, and those the user let through
        (named, or a READ approved) shown from the next command on."""
        from whiz.environments import environment_for

        options = dataclasses.replace(sandbox, secret_files=self.ws.secrets)
        return environment_for(self.ws.root, options, timeout_s=timeout_s, shown=self.granted)

    def withheld(self, rel: str) -> bool:
        """Whether `rel` looks like a secret that the model has not been let see."""
        return self.ws.is_secret(rel) and self._key(rel) not in self.granted and rel not in self.granted

    def grant(self, rel: str) -> None:
        self.granted.add(self._key(rel))

    def grant_named(self, text: str) -> list[str]:
        """Let the model see the secret-looking files `text` (the user's own message) names by path
        or by file name; returns them."""
        words = set(re.findall(r"[\w./~-]+", text))
        words |= {w.rstrip(".") for w in words}
        named = []
        for rel in self.files():
            if rel in words or f"./{rel}" in words or PurePosixPath(rel).name in words:
                self.grant(rel)
                named.append(rel)
        return named

    def files(self) -> list[str]:
        """The workspace's secret-looking files."""
        try:
            return [rel for rel in self.ws.list_files(".", limit=100_000) if self.ws.is_secret(rel)]
        except (OSError, WhizAgentError):  # a workspace that cannot be listed has nothing to mask
            return []

    def redact(self, text: str) -> str:
        """`text` with the values of every withheld file masked, and any private key's body: no
        coding task needs one, so it stays out even of a file the user let the model see."""
        values: set[str] = set()
        for rel in self.files():
            if self.withheld(rel):
                values |= self._file_values(rel)
        return redact(text, values)

    def _file_values(self, rel: str) -> set[str]:
        path = self.ws.root / rel
        try:
            stat = path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            cached = self._values.get(rel)
            if cached is None or cached[0] != stamp:
                text = path.read_bytes()[:1_000_000].decode("utf-8", errors="replace")
                cached = self._values[rel] = (stamp, secret_values(text))
        except OSError:
            return set()
        return cached[1]

    def _key(self, rel: str) -> str:
        try:
            return self.ws.relative(self.ws.resolve(rel))
        except WhizAgentError:  # a path that does not resolve is refused where it is used
            return rel
