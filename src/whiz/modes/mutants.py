"""Small, mechanical changes of one function (mutants): the bugs a test catches most often are one
token wrong, a comparison that should include its bound, a constant off by one, `and` for `or`, a
regular expression's missing `+`, a mutable default, `split` for `rsplit`, a wrong key, a wrong
variable. Each mutant changes one thing, so testing
some dozens costs test runs and no model at all, and one that passes is the smallest fix there is.

`mutants(source)` lists them for a function's source (as it is in its file, indented), each
parsed before it is offered; the lines a failing call ran come first (`first`). A function
longer than `LONGEST` lines has none."""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from whiz.agent.editing.edits import FileChange
from whiz.agent.errors import WhizAgentError

if TYPE_CHECKING:
    from whiz.agent.project.workspace import Workspace
    from whiz.modes.localize import Localization

COMPARISONS = {
    "<": ("<=", ">"),
    "<=": ("<", ">="),
    ">": (">=", "<"),
    ">=": (">", "<="),
    "==": ("!=",),
    "!=": ("==",),
}
SWAPS = {
    "and": "or",
    "or": "and",
    "min": "max",
    "max": "min",
    "True": "False",
    "False": "True",
    "floor": "ceil",
    "ceil": "floor",
    "any": "all",
    "all": "any",
    "startswith": "endswith",
    "endswith": "startswith",
    "lstrip": "rstrip",
    "rstrip": "lstrip",
    "int": "round",
    "round": "int",
    "break": "continue",
    "continue": "break",
}
METHODS = {
    "split": ("rsplit",),
    "rsplit": ("split",),
    "find": ("rfind",),
    "rfind": ("find",),
    "index": ("rindex",),
    "rindex": ("index",),
    "partition": ("rpartition",),
    "rpartition": ("partition",),
    "strip": ("lstrip", "rstrip"),
    "upper": ("lower",),
    "lower": ("upper",),
    "isupper": ("islower",),
    "islower": ("isupper",),
}
"""Methods swapped only as methods (after a `.`): a variable may be called `index`."""
KEYED = {"get", "pop", "setdefault"}
"""Methods whose first argument is a key, as a subscript's is (`key` mutants)."""
ARITHMETIC = {"+": "-", "-": "+", "//": "/", "/": "//"}
OPERAND_END = {tokenize.NAME, tokenize.NUMBER, tokenize.STRING}
"""Tokens after which `+` or `-` is a binary operator (with a closing bracket)."""
NO_CONSTANT_AFTER = {"%", "*", "/", "//", "**", "=", "<<", ">>"}
"""Operators whose number changed by one is seldom a bug's fix and often passes a weak test by
chance (`n % 10` as `n % 11`), and keyword defaults."""
LARGEST_CONSTANT = 1000
LONGEST = 300
"""Lines of the longest function mutated: each mutant is the function written out whole, so a
function of thousands of lines would cost its size times its tokens before any is tested, and
a bug in one is seldom found one token at a time."""
REGEX_CLASS = re.compile(r"\\[dws](?![+*?{])")
MUTABLE = {"List": "[]", "Dict": "{}", "Set": "set()"}
ORDER = ("compare", "constant", "bound", "regex", "default", "swap", "arithmetic", "not", "key", "variable")
"""Kinds in the order they are offered: the common bugs first."""


@dataclass(frozen=True)
class Mutant:
    """A function's source with one change, and what the change is."""

    source: str
    line: int
    """The changed line, 1-based within the function's source."""
    kind: str
    said: str
    """The change in words, for the user (`line 4: > for >=`)."""


def mutants(source: str, *, first: Collection[int] | None = None, limit: int = 40) -> list[Mutant]:
    """Up to `limit` distinct mutants of the function `source` that parse: those of the lines in
    `first` (1-based) first, then the others; each part by kind (`ORDER`), then top to bottom.
    Nothing where the source does not parse or tokenize."""
    if source.count("\n") > LONGEST:
        return []
    body = textwrap.dedent(source)
    margin = len(source.split("\n", 1)[0]) - len(body.split("\n", 1)[0])
    try:
        tree = ast.parse(body)
        tokens = list(tokenize.generate_tokens(io.StringIO(body).readline))
    except (SyntaxError, tokenize.TokenError, IndentationError, ValueError):
        return []
    lines = body.splitlines(keepends=True)
    found: list[Mutant] = []
    found += _token_mutants(lines, tokens)
    found += _inserted(lines, tree)
    found += _defaults(lines, tree)
    found += _keys(lines, tree)
    found += _variables(lines, tree)

    def rank(m: Mutant) -> tuple:
        return (first is not None and m.line not in first, ORDER.index(m.kind), m.line)

    seen = {body}
    chosen: list[Mutant] = []
    for m in sorted(found, key=rank):
        if m.source in seen or not _parses(m.source):
            continue
        seen.add(m.source)
        chosen.append(Mutant(_indent(m.source, source, margin), m.line, m.kind, m.said))
        if len(chosen) >= limit:
            break
    return chosen


def mutant_change(ws: Workspace, place: Localization, mutant: Mutant) -> FileChange | None:
    """The mutant put in its function's place in the file; None where the file no longer holds
    the function as it was localized."""
    fn = place.function
    try:
        text = ws.read_text(fn.path)
    except (OSError, UnicodeDecodeError, WhizAgentError):
        return None
    lines = text.splitlines(keepends=True)
    if "".join(lines[fn.start - 1 : fn.end]) != fn.source:
        return None
    body = mutant.source
    if fn.source.endswith("\n") and not body.endswith("\n"):
        body += "\n"
    return FileChange(fn.path, text, "".join(lines[: fn.start - 1]) + body + "".join(lines[fn.end :]))


def _token_mutants(lines: list[str], tokens: list[tokenize.TokenInfo]) -> list[Mutant]:
    out: list[Mutant] = []
    for i, tok in enumerate(tokens):
        before = tokens[i - 1] if i else None
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        text = tok.string
        if tok.type == tokenize.OP and text in COMPARISONS:
            out += [_replace(lines, tok, new, "compare", f"{text} for {new}") for new in COMPARISONS[text]]
        elif tok.type == tokenize.NAME and text in METHODS and before is not None and before.string == ".":
            out += [_replace(lines, tok, new, "swap", f"{text} for {new}") for new in METHODS[text]]
        elif (
            tok.type == tokenize.NAME
            and text in SWAPS
            and not _is_definition(before)
            and not _is_attribute(before)
        ):
            out.append(_replace(lines, tok, SWAPS[text], "swap", f"{text} for {SWAPS[text]}"))
        elif tok.type == tokenize.NAME and text == "not" and _is_negation(before, after):
            out.append(_replace(lines, tok, "", "not", "`not` taken out", eat_space=True))
        elif tok.type == tokenize.OP and text in ARITHMETIC and _is_binary(before):
            new = ARITHMETIC[text]
            out.append(_replace(lines, tok, new, "arithmetic", f"{text} for {new}"))
        elif (
            tok.type == tokenize.NUMBER
            and _small_int(text)
            and not (before and before.string in NO_CONSTANT_AFTER)
        ):
            n = int(text)
            for new in (n + 1, n - 1):
                if new >= 0:
                    out.append(_replace(lines, tok, str(new), "constant", f"{n} for {new}"))
        elif tok.type == tokenize.STRING and _is_raw(text):
            for match in REGEX_CLASS.finditer(text):
                new = text[: match.end()] + "+" + text[match.end() :]
                out.append(_replace(lines, tok, new, "regex", f"{match.group()} for {match.group()}+"))
    return out


def _inserted(lines: list[str], tree: ast.AST) -> list[Mutant]:
    """An off-by-one where the code has no number to change: `len(x)`, a slice's bound and
    `range`'s last argument, each with one added and one taken away."""
    out: list[Mutant] = []
    for node in ast.walk(tree):
        spots: list[ast.expr] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "len":
                spots.append(node)
            elif node.func.id == "range" and node.args and not isinstance(node.args[-1], ast.Constant):
                spots.append(node.args[-1])
        elif isinstance(node, ast.Call) and _splits_all(node):
            # `split(sep)` where only the first separator splits (`key=a=b`).
            row, col = node.end_lineno or 0, (node.end_col_offset or 0) - 1
            if row == node.lineno and _splice(lines[row - 1], col, col + 1) == ")":
                new = _splice(lines[row - 1], col, col, ", 1")
                out.append(Mutant(_with_line(lines, row, new), row, "bound", f"line {row}: split once"))
        elif isinstance(node, ast.Slice):
            spots += [
                b for b in (node.lower, node.upper) if b is not None and not isinstance(b, ast.Constant)
            ]
        for spot in spots:
            if spot.end_lineno is None or spot.end_col_offset is None or spot.end_lineno != spot.lineno:
                continue
            row, col = spot.end_lineno, spot.end_col_offset
            line = lines[row - 1]
            what = ast.get_source_segment("".join(lines), spot) or "it"
            for extra in (" + 1", " - 1"):
                new = _splice(line, col, col, extra)
                said = f"line {row}: {what}{extra}"
                out.append(Mutant(_with_line(lines, row, new), row, "bound", said))
    return out


def _defaults(lines: list[str], tree: ast.AST) -> list[Mutant]:
    """A mutable default (`items=[]`, shared by every call) made None, and a fresh one made in the
    body where it is None."""
    out: list[Mutant] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.body:
            continue
        args = fn.args.args + fn.args.kwonlyargs
        defaults = [None] * (len(fn.args.args) - len(fn.args.defaults)) + list(fn.args.defaults)
        defaults += list(fn.args.kw_defaults)
        first = fn.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(fn.body) > 1:
            first = fn.body[1]  # after the docstring
        for arg, default in zip(args, defaults, strict=False):
            empty = _empty_value(default)
            if empty is None or default is None or default.end_col_offset is None:
                continue
            row = default.lineno
            line = lines[row - 1]
            changed = _splice(line, default.col_offset, default.end_col_offset, "None")
            pad = lines[first.lineno - 1][: first.col_offset]
            fresh = f"{pad}if {arg.arg} is None:\n{pad}    {arg.arg} = {empty}\n"
            new = list(lines)
            new[row - 1] = changed
            new.insert(first.lineno - 1, fresh)
            out.append(Mutant("".join(new), row, "default", f"a fresh {empty} for {arg.arg} at each call"))
    return out


def _keys(lines: list[str], tree: ast.AST) -> list[Mutant]:
    """A wrong key: each string a subscript or `.get` reads, as another such string of the function."""
    spots = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            spots.append(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in KEYED:
            spots += node.args[:1]
    keys = [s for s in spots if isinstance(s, ast.Constant) and isinstance(s.value, str)]
    names = sorted({k.value for k in keys})
    out: list[Mutant] = []
    for key in keys:
        for other in names:
            if other != key.value:
                out += _segment(lines, key, repr(other), "key", f"{key.value!r} for {other!r}")
    return out


def _variables(lines: list[str], tree: ast.AST) -> list[Mutant]:
    """A wrong variable: each read of a parameter or local as another of the function's that has
    a value there (a parameter, or one set on an earlier line), not one that would be unbound."""
    fn = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        return []
    first_set = {a.arg: 0 for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            first_set[node.id] = min(first_set.get(node.id, node.lineno), node.lineno)
    first_set.pop("self", None)
    out: list[Mutant] = []
    for read in ast.walk(fn):
        if not (isinstance(read, ast.Name) and isinstance(read.ctx, ast.Load) and read.id in first_set):
            continue
        for other, since in sorted(first_set.items()):
            if other != read.id and since < read.lineno:
                out += _segment(lines, read, other, "variable", f"{read.id} for {other}")
    return out


def _segment(lines: list[str], node: ast.expr, new: str, kind: str, said: str) -> list[Mutant]:
    """`node`'s text (on one line) replaced by `new`."""
    if node.end_lineno != node.lineno or node.end_col_offset is None:
        return []
    row, line = node.lineno, lines[node.lineno - 1]
    changed = _splice(line, node.col_offset, node.end_col_offset, new)
    return [Mutant(_with_line(lines, row, changed), row, kind, f"line {row}: {said}")]


def _splits_all(node: ast.Call) -> bool:
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in ("split", "rsplit")
        and len(node.args) == 1
        and not node.keywords
    )


def _empty_value(node: ast.expr | None) -> str | None:
    if node is None:
        return None
    if isinstance(node, (ast.List, ast.Dict, ast.Set)) and not getattr(
        node, "elts", getattr(node, "keys", [])
    ):
        return MUTABLE[type(node).__name__]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
        return {"list": "[]", "dict": "{}", "set": "set()"}.get(node.func.id)
    return None


def _replace(
    lines: list[str], tok: tokenize.TokenInfo, new: str, kind: str, said: str, *, eat_space=False
) -> Mutant:
    (row, col), end_col = tok.start, tok.end[1]
    line = lines[row - 1]
    rest = line[end_col:]
    if eat_space:
        rest = rest.lstrip(" ")
    return Mutant(_with_line(lines, row, line[:col] + new + rest), row, kind, f"line {row}: {said}")


def _splice(line: str, start: int, end: int, new: str | None = None) -> str:
    """`line` with its bytes start:end (`ast`'s offsets count UTF-8 bytes) replaced by `new`; with
    no `new`, those bytes themselves."""
    raw = line.encode()
    if new is None:
        return raw[start:end].decode(errors="replace")
    return (raw[:start] + new.encode() + raw[end:]).decode(errors="replace")


def _with_line(lines: list[str], row: int, new: str) -> str:
    return "".join(lines[: row - 1]) + new + "".join(lines[row:])


def _is_definition(before: tokenize.TokenInfo | None) -> bool:
    return before is not None and before.string in ("def", "class")


def _is_attribute(before: tokenize.TokenInfo | None) -> bool:
    return before is not None and before.string == "."


def _is_negation(before: tokenize.TokenInfo | None, after: tokenize.TokenInfo | None) -> bool:
    """`not x`, but not `is not` or `not in`, whose meaning is one operator."""
    return not (before is not None and before.string == "is") and not (
        after is not None and after.string == "in"
    )


def _is_binary(before: tokenize.TokenInfo | None) -> bool:
    if before is None:
        return False
    if before.type == tokenize.NAME and before.string in (
        "return",
        "in",
        "and",
        "or",
        "not",
        "if",
        "else",
        "is",
    ):
        return False
    return before.type in OPERAND_END or before.string in (")", "]", "}")


def _small_int(text: str) -> bool:
    return text.isdigit() and int(text) <= LARGEST_CONSTANT


def _is_raw(text: str) -> bool:
    prefix = text[: len(text) - len(text.lstrip("rRbBuUfF"))]
    return "r" in prefix.lower()


def _parses(body: str) -> bool:
    try:
        ast.parse(body)
    except SyntaxError:
        return False
    return True


def _indent(body: str, source: str, margin: int) -> str:
    """The mutant indented as the function is in its file (a method's source is indented)."""
    if not margin:
        return body
    pad = source[:margin]
    return "".join(pad + line if line.strip() else line for line in body.splitlines(keepends=True))
