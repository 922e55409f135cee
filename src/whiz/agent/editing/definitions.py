"""A code block that holds only definitions, as an edit of those definitions.

Asked to fix a function, a small model often answers with the corrected function alone: in a
fence, with no path and no SEARCH/REPLACE block. That is an edit in all but its form, because
the function it redefines exists in one file of the workspace. So a fenced block that is nothing
but top-level definitions (functions and classes; imports, example calls and a `__main__` guard
may come along and are left out), each of a name defined at the top level of exactly one file,
replaces those definitions in their files.

Python only: `ast` says for certain what a block holds, and a guess here rewrites code.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

from whiz.agent.editing.edits import SearchReplace
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace

_FENCED = re.compile(r"^[ \t]*```[\w+.-]*[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.S | re.M)
MAX_FILES = 2000
MAX_FILE_CHARS = 200_000
DEFINITION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
"""The top-level statements that define a name a block may replace: functions and classes."""


@dataclass
class Definition:
    """A top-level definition: its name and its source, decorators included."""

    name: str
    text: str


def code_blocks(reply: str) -> list[str]:
    """The reply's fenced code blocks that hold something, each without the indent it shares: a
    block in a list item is indented with it ("1. Fix it:" then "   ```python"), its code too."""
    return [textwrap.dedent(b) for b in _FENCED.findall(reply) if b.strip()]


def definition_edits(ws: Workspace, reply: str, *, as_is: bool = False) -> list[SearchReplace]:
    """The edits the reply's definitions-only code blocks stand for (none when it has none, or
    when a name it defines is not defined in exactly one Python file of `ws`). `as_is`: a
    definition written back as it is is an edit too, one that changes nothing, so that a reply
    of only those reads as the code written back, not as a reply with no edit in it."""
    blocks = code_blocks(reply)
    # By name, the last one written winning: a reply that shows a function twice means its last.
    news = {d.name: d for block in blocks for d in definitions_only(block)}.values()
    if not news:
        return []
    found = workspace_definitions(ws)
    edits: list[SearchReplace] = []
    for new in news:
        places = found.get(new.name, [])
        if len(places) != 1:
            return []  # a name that is nowhere, or in several files: no safe guess where it goes
        path, old = places[0]
        if as_is or old.text != new.text:  # one quoted as it is changes nothing (a test file, say)
            edits.append(SearchReplace(path, old.text, new.text))
    return edits


def part_of_file(ws: Workspace, path: str, code: str) -> bool:
    """Whether `code` is only some of the top-level definitions of `path`: written over that file
    it would delete the others."""
    try:
        return partial(ws.read_text(path), code)
    except (OSError, UnicodeDecodeError, WhizAgentError):
        return False


def partial(text: str, code: str) -> bool:
    """Whether `code` is only some of the top-level definitions of the file `text`."""
    names = {d.name for d in definitions_only(code)}
    return bool(names) and names < {d.name for d in file_definitions(text)}


def definitions_into(path: str, text: str, code: str) -> list[SearchReplace]:
    """The edits that put the definitions of `code` (only some of the file's: `partial`) in
    place of those of the same name in `path`, whose text is `text`; none where `code` is not
    that."""
    if not partial(text, code):
        return []
    have = {d.name: d for d in file_definitions(text)}
    news = {d.name: d for d in definitions_only(code)}.values()
    return [SearchReplace(path, have[d.name].text, d.text) for d in news if have[d.name].text != d.text]


def definitions_only(code: str) -> list[Definition]:
    """The top-level definitions of `code` when that is all it holds (besides imports, bare
    expressions such as example calls, and an `if __name__ == "__main__":` block); else none."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    lines = code.splitlines(keepends=True)
    found = []
    for node in tree.body:
        if isinstance(node, DEFINITION_NODES):
            found.append(Definition(node.name, _source(lines, node)))
        elif not isinstance(node, ast.Import | ast.ImportFrom | ast.Expr) and not _main_guard(node):
            return []
    return found


def workspace_definitions(ws: Workspace) -> dict[str, list[tuple[str, Definition]]]:
    """Each top-level definition of the workspace's Python files, by name: (path, definition)."""
    found: dict[str, list[tuple[str, Definition]]] = {}
    for path, text in ws.python_sources(limit=MAX_FILES, max_chars=MAX_FILE_CHARS):
        for d in file_definitions(text):
            found.setdefault(d.name, []).append((path, d))
    return found


def file_definitions(text: str) -> list[Definition]:
    """The top-level definitions of a Python file (none if it does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    return [Definition(n.name, _source(lines, n)) for n in tree.body if isinstance(n, DEFINITION_NODES)]


def _source(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return "".join(lines[start - 1 : node.end_lineno]).rstrip("\n")


def _main_guard(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )
