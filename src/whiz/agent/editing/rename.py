"""A rename the task asks for, done exactly on the code's tokens instead of by the model.

"Rename say_hello to greet_person, updating every call to it" is a change with one right answer,
and the small model gets it wrong as often as right: it writes the renamed function alone over
its file, or renames the definition and leaves the calls. Python's own tokenizer finds every use
of the name for certain (not in strings or comments), so a rename whose meaning is plain is done
here, in milliseconds, and the model is not asked.

Plain means: the task is nothing but the rename (a lead-in naming the file and a clause about
updating its calls may come along); the old name is defined exactly once in the workspace's
Python files, by a `def` or `class`, and bound nowhere else (no assignment, argument, import
alias or second definition that a token rename would change the meaning of); the new name is
used nowhere yet; and no string is the bare old name (`__all__`, `getattr`: a use the tokens do
not show). Anything else is left to the model, as before.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import re
import tokenize
from dataclasses import dataclass

from whiz.agent.editing.edits import WholeFile
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace

MAX_FILES = 2000
MAX_FILE_CHARS = 200_000

COMMON_NAMES = frozenset(dir(builtins)).union(*(dir(kind) for kind in (dict, list, str, set, bytes, object)))
"""Names whose tokens stand for more than the workspace's definition: a builtin, or a method of a
builtin type (`d.get`, `s.split`): renaming those tokens would rename other code's uses too."""

_NAME = r"`?([A-Za-z_]\w*)(?:\(\))?`?"
_FILE = r"`?[\w./-]+\.py`?"
_KIND = r"(?:(?:the\s+)?(?:function|method|class|name|identifier)\s+)?"
_REQUEST = re.compile(
    rf"^\s*(?:in\s+{_FILE}\s*,?\s+)?rename\s+{_KIND}{_NAME}(?:\s+(?:in|from)\s+{_FILE})?\s+(?:to|as)\s+"
    rf"{_NAME}(?P<rest>.*)$",
    re.I | re.S,
)
_CALLS = r"(?:calls?|callers?|call\s+sites?|references?|uses?|usages?|occurrences?)"
# What may follow the rename: "updating every call to it", "and update all references", "."
_REST = re.compile(
    rf"^(?:\s+in\s+{_FILE})?[\s,;.]*(?:(?:and\s+)?(?:update|updating|change|changing|fix|fixing|rename|renaming)\s+"
    rf"(?:every|each|all|the|its)?\s*(?:of\s+(?:the|its)\s+)?{_CALLS}"
    rf"(?:\s+(?:to|of)\s+(?:it|them|the\s+function|the\s+class|`?\w+`?))?(?:\s+in\s+\S+?)?"
    rf"(?:\s+(?:too|as\s+well))?[\s.]*)?$",
    re.I,
)


@dataclass
class Rename:
    """A rename done: the edits that do it and how many uses of the name each file had."""

    old: str
    new: str
    edits: list[WholeFile]
    uses: dict[str, int]

    def summary(self) -> str:
        places = ", ".join(f"{n} in {path}" for path, n in self.uses.items())
        return f"Renamed {self.old} to {self.new} ({places}): an exact rename of the name's uses."


def requested(task: str) -> tuple[str, str] | None:
    """The (old, new) names when `task` asks for a rename and nothing else; None otherwise."""
    found = _REQUEST.match(task)
    if found is None or not _REST.match(found.group("rest")):
        return None
    old, new = found.group(1), found.group(2)
    if old == new or keyword.iskeyword(new) or keyword.iskeyword(old) or old in COMMON_NAMES:
        return None
    return old, new


def exact_rename(ws: Workspace, task: str) -> Rename | None:
    """The rename `task` asks for, planned over the workspace's Python files; None where its
    meaning is not plain (the module's doc), and the model should do it."""
    names = requested(task)
    if names is None:
        return None
    old, new = names
    # Not `Workspace.python_sources`: an index may pass over an odd file, a rename may not (a use
    # left behind breaks the code), so any file it cannot read whole ends it here. A Python file
    # that looks like a secret is neither read nor edited without the user's say: with one in the
    # workspace, the rename is the model's, whose edits ask for it.
    try:
        paths = [p for p in ws.list_files(".", limit=MAX_FILES) if p.endswith(".py")]
    except (OSError, WhizAgentError):
        return None
    if any(ws.is_secret(p) for p in paths):
        return None
    defined, edits, uses = 0, [], {}
    for path in paths:
        try:
            text = ws.read_text(path)
        except (OSError, UnicodeDecodeError, WhizAgentError):
            return None
        if old not in text and new not in text:
            continue
        if len(text) > MAX_FILE_CHARS:
            return None
        found = _uses(text, old, new)
        if found is None:
            return None
        definitions, spots = found
        defined += definitions
        if spots:
            edits.append(WholeFile(path, _renamed(text, spots, len(old), new)))
            uses[path] = len(spots)
    if defined != 1:
        return None
    return Rename(old, new, edits, uses)


def _uses(text: str, old: str, new: str) -> tuple[int, list[tuple[int, int]]] | None:
    """How many `def`/`class` statements define `old` in `text`, and where its name tokens are
    (line, column); None where a token rename could change what the code means."""
    try:
        tree = ast.parse(text)
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (SyntaxError, tokenize.TokenError, ValueError):
        return None
    definitions = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == old:
            definitions += 1
        elif _binds(node, old):
            return None
    spots = []
    for token in tokens:
        if token.type == tokenize.NAME and token.string == new:
            return None  # the new name is taken
        if token.type == tokenize.NAME and token.string == old:
            spots.append(token.start)
        elif token.type == tokenize.STRING and _bare(token.string) == old:
            return None
    return definitions, spots


def _binds(node: ast.AST, old: str) -> bool:
    """Whether `node` binds `old` other than by a definition: an assignment, an argument (or a
    keyword argument, which names another function's), a `global`, an import alias, an
    exception's name, a pattern's capture."""
    match node:
        case ast.Name(id=name, ctx=ast.Store() | ast.Del()):
            return name == old
        case ast.arg(arg=name) | ast.keyword(arg=name):
            return name == old
        case ast.alias(name=name, asname=alias):
            return alias == old or (alias is not None and name.split(".")[-1] == old)
        case ast.Global(names=names) | ast.Nonlocal(names=names):
            return old in names
        case ast.ExceptHandler(name=name) | ast.MatchAs(name=name) | ast.MatchStar(name=name):
            return name == old
    return False


def _bare(literal: str) -> str | None:
    """A string literal's text when it is a plain quoted word ('say_hello'), else None."""
    found = re.fullmatch(r"[rRuU]?(['\"])(\w+)\1", literal)
    return found.group(2) if found else None


def _renamed(text: str, spots: list[tuple[int, int]], width: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    for row, col in sorted(spots, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + width :]
    return "".join(lines)
