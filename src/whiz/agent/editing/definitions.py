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


def method_edits(ws: Workspace, reply: str, *, as_is: bool = False) -> list[SearchReplace]:
    """The edits of a reply whose code block holds only methods written alone, out of their
    class (`def pop(self): ...` for `Stack.pop`): each replaces the method of its name, indented
    as it is, where exactly one class of the workspace has a method of that name and no file
    defines it at the top level (that is `definition_edits`' case). None where any function of
    the block is not such a method: written over its file, a lone method would delete the class.
    A class written with only some of its methods, each one it has, stands for those methods.
    `as_is`: as for `definition_edits`, a method written back as it is is an edit too."""
    news = [d for block in code_blocks(reply) for d in definitions_only(block)]
    if not news:
        return []
    top = workspace_definitions(ws)
    methods = workspace_methods(ws)
    owners: dict[str, str] = {}  # a method written inside its class: the class it must be in
    if all(d.text.startswith("class ") for d in news):
        inside = [(d.name, m) for d in news for _, m in class_methods(d.text)]
        if not inside or any(len(top.get(d.name, [])) != 1 for d in news):
            return []
        # Only some of the class's methods, each one it has: the rest of the class stays.
        mine = {(owner, m.name) for path, owner, m in (x for ms in methods.values() for x in ms)}
        if any((cls, m.name) not in mine for cls, m in inside) or not _fewer(news, methods):
            return []
        owners = {m.name: cls for cls, m in inside}
        news = [Definition(m.name, textwrap.dedent(m.text)) for _, m in inside]
    elif any(not d.text.lstrip().startswith(("def ", "async def ", "@")) for d in news):
        return []
    edits: list[SearchReplace] = []
    for new in {d.name: d for d in news}.values():
        places = methods.get(new.name, [])
        if new.name in owners:
            places = [x for x in places if x[1] == owners[new.name]]
        if new.name in top or len(places) != 1:
            return []
        path, _, old = places[0]
        indent = old.text[: len(old.text) - len(old.text.lstrip())]
        text = textwrap.indent(new.text, indent)
        if as_is or text != old.text:
            edits.append(SearchReplace(path, old.text, text))
    return edits


def _fewer(classes: list[Definition], methods: dict[str, list[tuple[str, str, Definition]]]) -> bool:
    """Whether each class written holds fewer methods than the workspace's class of its name."""
    for cls in classes:
        have = sum(owner == cls.name for places in methods.values() for _, owner, _ in places)
        if len(class_methods(cls.text)) >= have:
            return False
    return True


def workspace_methods(ws: Workspace) -> dict[str, list[tuple[str, str, Definition]]]:
    """Each method of the workspace's top-level classes, by name: (path, class, definition), the
    definition's text indented as it is in its file."""
    found: dict[str, list[tuple[str, str, Definition]]] = {}
    for path, text in ws.python_sources(limit=MAX_FILES, max_chars=MAX_FILE_CHARS):
        for owner, method in class_methods(text):
            found.setdefault(method.name, []).append((path, owner, method))
    return found


def class_methods(text: str) -> list[tuple[str, Definition]]:
    """The methods of a Python file's top-level classes: (class name, definition), the text
    indented as in the file (none if it does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    return [
        (cls.name, Definition(node.name, _source(lines, node)))
        for cls in tree.body
        if isinstance(cls, ast.ClassDef)
        for node in cls.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


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
