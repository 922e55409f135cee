"""The code a task is about, found before the model is first asked.

A small model that is not shown the code it must change guesses, or asks to read files it cannot
name. So the first message carries the definitions the task (or a failing test's output) names:
identifiers in the text matched against the definitions tree-sitter finds in the workspace, and
for a traceback, the functions of workspace files it passes through. A repository of a few files
that all fit the budget is attached whole, since then the model sees everything at no risk.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import Any

from whiz.agent.context.repomap import (
    CONTAINERS,
    DEFINITIONS,
    WRAPPERS,
    language_of,
    len_based_estimate,
    parser_for,
)
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.secret_files import holds_private_key
from whiz.agent.project.workspace import Workspace

TINY_REPO_FILES = 8
"""A repository of at most this many (readable, text) files, all within the budget, goes whole."""
MAX_FILES_SCANNED = 2000
MAX_FILE_CHARS = 200_000
MAX_MATCHES_PER_NAME = 3
"""A name defined in many files (`main`, `run`) says little about which one is meant."""
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
# Python's `File "x.py", line 3, in f` and pytest's `x.py:3: in f`.
_PY_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\w+)')
_PYTEST_FRAME = re.compile(r"^([\w./\\-]+\.\w+):(\d+):(?: in (\w+))?", re.M)
_SKIP = frozenset(keyword.kwlist) | {"self", "cls", "None", "True", "False", "test", "tests", "file"}


@dataclass
class Definition:
    """A named definition and the lines (1-based, inclusive) it spans in its file."""

    path: str
    name: str
    start: int
    end: int


@dataclass
class Snippet:
    """Code attached to a message: a whole file, or the lines of one definition in it."""

    path: str
    text: str
    start: int | None = None
    end: int | None = None

    @property
    def whole(self) -> bool:
        return self.start is None

    def render(self) -> str:
        where = "" if self.whole else f" (lines {self.start}-{self.end})"
        body = self.text if self.text.endswith("\n") else self.text + "\n"
        return f"{self.path}{where}:\n```\n{body}```"


def relevant_code(
    ws: Workspace,
    texts: list[str],
    budget_tokens: int,
    skip: set[str] = frozenset(),
    *,
    whole_repo: bool = True,
) -> list[Snippet]:
    """The code `texts` (a task, a test's output) are about, most relevant first, within
    `budget_tokens` (about four characters a token). Files in `skip` are already shown. A tiny
    repository goes whole when the texts name something in it, or with `whole_repo` (a
    conversation's first message: later ones would only repeat it)."""
    if budget_tokens <= 0:
        return []
    files = _readable(ws)
    wanted = _ranked_files(ws, files, texts)
    small = [p for p in files if p not in skip]
    total = sum(len_based_estimate(files[p]) for p in small)
    if len(files) <= TINY_REPO_FILES and total <= budget_tokens and (whole_repo or wanted):
        order = [p for p in wanted if p in small] + sorted(p for p in small if p not in wanted)
        return [Snippet(p, files[p]) for p in order]
    snippets: list[Snippet] = []
    left = budget_tokens
    for path, spans in wanted.items():
        if path in skip:
            continue
        text = files[path]
        cost = len_based_estimate(text)
        if cost <= min(left, budget_tokens // 2):  # a small file whole: edits copy from it exactly
            snippets.append(Snippet(path, text))
            left -= cost
            continue
        lines = text.splitlines(keepends=True)
        for d in spans:
            part = "".join(lines[d.start - 1 : d.end])
            cost = len_based_estimate(part) + 10
            if cost <= left:
                snippets.append(Snippet(path, part, d.start, d.end))
                left -= cost
    return snippets


def definitions(files: dict[str, str]) -> list[Definition]:
    """Every named definition in `files` (path -> text) whose language tree-sitter knows."""
    parsers: dict[str, Any] = {}
    found: list[Definition] = []
    for path, text in files.items():
        language = language_of(path)
        parser = parser_for(language, parsers) if language else None
        if parser is None:
            continue
        source = text.encode("utf-8")
        _walk(parser.parse(source).root_node, source, path, 0, found)
    return found


def traceback_frames(ws: Workspace, text: str) -> list[tuple[str, str | None]]:
    """(workspace path, function) of each frame of `text` that is in the workspace, in order."""
    frames = [(m.group(1), m.group(3)) for m in _PY_FRAME.finditer(text)]
    frames += [(m.group(1), m.group(3)) for m in _PYTEST_FRAME.finditer(text)]
    root = str(ws.root.resolve()).rstrip("/") + "/"
    out = []
    for raw, func in frames:
        path = raw.replace("\\", "/").removeprefix(root).removeprefix("./")
        if not path.startswith("/") and ws.exists(path) and (path, func) not in out:
            out.append((path, func))
    return out


def _ranked_files(ws: Workspace, files: dict[str, str], texts: list[str]) -> dict[str, list[Definition]]:
    """Files with the definitions the texts name, in order of relevance: frames of a traceback
    first (the innermost, where it failed, first), then names the texts mention."""
    defs = definitions(files)
    by_name: dict[str, list[Definition]] = {}
    for d in defs:
        by_name.setdefault(d.name, []).append(d)
    stems: dict[str, list[str]] = {}
    for path in files:
        stems.setdefault(path.rsplit("/", 1)[-1].rsplit(".", 1)[0], []).append(path)
    ranked: dict[str, list[Definition]] = {}

    def add(d: Definition) -> None:
        spans = ranked.setdefault(d.path, [])
        if d not in spans:
            spans.append(d)

    for text in texts:
        for path, func in reversed(traceback_frames(ws, text)):
            for d in by_name.get(func or "", []):
                if d.path == path:
                    add(d)
    for text in texts:
        for word in dict.fromkeys(_WORD.findall(text)):
            if word in _SKIP:
                continue
            matches = by_name.get(word, [])
            if 0 < len(matches) <= MAX_MATCHES_PER_NAME:
                for d in matches:
                    add(d)
            elif len(stems.get(word, [])) == 1:  # "the stats module": stats.py
                ranked.setdefault(stems[word][0], [])
    return ranked


def _readable(ws: Workspace) -> dict[str, str]:
    """Workspace text files (path -> text), small enough to index. Files that look like secrets
    are left out: the task attaches one only where it names it (`prompt.mentioned_files`)."""
    try:
        paths = ws.list_files(".", limit=MAX_FILES_SCANNED)
    except (OSError, WhizAgentError):
        return {}
    files: dict[str, str] = {}
    for path in paths:
        try:
            if ws.is_secret(path):
                continue
            if (ws.root / path).stat().st_size > MAX_FILE_CHARS:
                continue
            text = ws.read_text(path)
            if not holds_private_key(text):
                files[path] = text
        except (OSError, UnicodeDecodeError, WhizAgentError):
            continue
    return files


def _walk(node: Any, source: bytes, path: str, depth: int, found: list[Definition]) -> None:
    for child in node.named_children:
        if child.type in WRAPPERS:
            _walk(child, source, path, depth, found)
        elif child.type in DEFINITIONS:
            name = child.child_by_field_name("name")
            if name is not None:
                text = source[name.start_byte : name.end_byte].decode("utf-8", errors="replace")
                found.append(Definition(path, text, child.start_point[0] + 1, child.end_point[0] + 1))
            body = child.child_by_field_name("body")
            if depth == 0 and child.type in CONTAINERS and body is not None:
                _walk(body, source, path, depth + 1, found)
