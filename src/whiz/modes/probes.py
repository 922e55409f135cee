"""Inputs the tests do not try, to tell passing candidates apart.

A test command's few cases cannot tell a fix from one fitted to them: a special case, a partial
fix, or a rewrite that breaks what the tests do not look at all pass. Candidates that are right
agree with each other on other inputs too; ones fitted to the cases shown mostly differ, each in
its own way. So the probes are the calls the test files make of the code, each with one constant
of its arguments moved (a number by one, a string changed, a list shortened), and every passing
candidate answers them in its own copy (`command`, run by `probe_run.py`); the candidate that
agrees with the most others on them is kept (`agreed`), the first to pass where none agrees more.

Only calls whose arguments are constants, or built from constants by what the test file
imports (`date(2024, 1, 1)`), are probes: a call of a variable the test built is not repeatable
outside the test. Only a pass that looks fitted is put to the vote (`fitted`): one that brings in
constants of the test files the code did not hold.
"""

from __future__ import annotations

import ast
import base64
import copy
import json
import os
import shlex
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from whiz.agent.errors import WhizAgentError
from whiz.agent.project.test_files import TestFiles, named_paths
from whiz.agent.project.workspace import Workspace

MAX_PROBES = 40
"""Probes at most: every call's variants in turn, so that each call has some."""
MAX_FILE_CHARS = 100_000
BUILDERS = frozenset(
    {"list", "tuple", "dict", "set", "frozenset", "range", "str", "int", "float", "bool", "sorted"}
)
"""Builtins a repeatable argument may be built with (`list(range(10))`)."""


@dataclass(frozen=True)
class Probes:
    """The probes of one heal: the test files' imports, and the calls to answer."""

    imports: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    shown: frozenset = frozenset()
    """The constants the test files hold (`fitted`)."""

    def __bool__(self) -> bool:
        return bool(self.calls)

    def command(self, python: str | None = None) -> str:
        """The shell command that answers the probes in its folder (`probe_run.py`)."""
        spec = {"imports": self.imports, "calls": self.calls}
        blob = base64.urlsafe_b64encode(zlib.compress(json.dumps(spec).encode(), 9)).decode()
        runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe_run.py")
        return f"{shlex.quote(python or sys.executable)} {shlex.quote(runner)} {blob}"


def find_probes(ws: Workspace, test_cmd: str) -> Probes:
    """The probes of the test files `test_cmd` names (the files, or the test files in the folders
    it names): their calls of functions they import from the workspace, varied."""
    named = named_paths(test_cmd)
    if not named:
        return Probes()
    try:
        files = [p for p in ws.list_files(".", limit=2000) if p.endswith(".py")]
    except (OSError, WhizAgentError):
        return Probes()
    tests = TestFiles("")
    under = [n.rstrip("/") + "/" for n in named]
    chosen = [p for p in files if p in named or (p in tests and any(p.startswith(u) for u in under))]
    imports: list[str] = []
    calls: list[list[str]] = []
    shown: set = set()
    for path in chosen:
        try:
            text = ws.read_text(path)
            tree = ast.parse(text) if len(text) <= MAX_FILE_CHARS else None
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, WhizAgentError):
            continue
        if tree is None:
            continue
        lines, names, functions = _imports(tree, ws)
        imports += [line for line in lines if line not in imports]
        calls += [list(_variants(call, names)) for call in _calls(tree, functions, names)]
        shown |= constants(tree)
    return Probes(imports, _interleaved(calls), frozenset(shown))


TRIVIAL = frozenset({-1, 0, 1, 2, ""})
"""Constants any code holds: one of them in a change says nothing of where it came from."""


def constants(tree: ast.AST) -> set:
    """The number and string constants in `tree`, but the trivial ones."""
    found = set()
    for node in ast.walk(tree):
        is_value = isinstance(node, ast.Constant) and type(node.value) in (int, float, str)
        if is_value and node.value not in TRIVIAL:
            found.add(node.value)
    return found


def fitted(probes: Probes, before: str | None, after: str | None) -> bool:
    """Whether a change brings in constants the test files hold that the code did not: a number
    they use, or a string that is one of theirs or part of one (`if n == 11: return "11th"`,
    `.replace("!", "")`), which is how a fix fitted to the cases shown looks."""
    try:
        old = constants(ast.parse(before or ""))
        new = constants(ast.parse(after or "")) - old
    except (SyntaxError, ValueError):
        return False
    texts = [c for c in probes.shown if isinstance(c, str)]
    for value in new:
        if value in probes.shown:
            return True
        if isinstance(value, str) and any(value in text for text in texts):
            return True
    return False


def _imports(tree: ast.Module, ws: Workspace) -> tuple[list[str], set[str], set[str]]:
    """The file's top-level imports as lines, every name they bind, and the names they bind from
    the workspace's own modules (the functions under test)."""
    lines: list[str] = []
    names: set[str] = set()
    own: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            lines.append(ast.unparse(node))
            bound = {a.asname or a.name.split(".")[0] for a in node.names}
            names |= bound
            if isinstance(node, ast.ImportFrom) and node.module and not node.level and _own(ws, node.module):
                own |= {a.asname or a.name for a in node.names if a.name != "*"}
    return lines, names, own


def _own(ws: Workspace, module: str) -> bool:
    path = module.replace(".", "/")
    try:
        return ws.exists(f"{path}.py") or ws.exists(f"{path}/__init__.py")
    except WhizAgentError:
        return False


def _calls(tree: ast.Module, functions: set[str], names: set[str]) -> list[ast.Call]:
    """Calls of `functions` whose arguments are repeatable: constants, or built from them by
    imported names."""
    found: list[ast.Call] = []
    seen: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions):
            continue
        parts = [*node.args, *(k.value for k in node.keywords)]
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        if all(_repeatable(a, names) for a in parts) and (text := ast.unparse(node)) not in seen:
            seen.add(text)
            found.append(node)
    return found


def _repeatable(node: ast.AST, names: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id not in names and sub.id not in BUILDERS:
            return False
        if isinstance(sub, ast.Lambda | ast.NamedExpr | ast.Await | ast.Yield | ast.comprehension):
            return False
    return True


def _variants(call: ast.Call, names: set[str]) -> Iterator[str]:
    """The call with one of its arguments' constants moved at a time (`_moved`), or one of its
    lists shortened."""
    original = ast.unparse(call)
    seen = {original}
    parts = [*call.args, *(k.value for k in call.keywords)]
    spots = [n for part in parts for n in ast.walk(part)]
    for at, spot in enumerate(spots):
        for value in _moved(spot):
            varied = ast.unparse(_replace_at(call, at, value))
            if varied not in seen:
                seen.add(varied)
                yield varied


def _moved(node: ast.AST) -> list[ast.expr]:
    """Other values where `node` stands: a number one up and one down, a string changed in case
    and length (its digits moved as a number's are), a list one shorter and reversed."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return [ast.Constant(node.value + 1), ast.Constant(node.value - 1)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        s = node.value
        out = [s.upper(), s + s, s[1:], _digits_up(s)] if s else ["a"]
        return [ast.Constant(v) for v in dict.fromkeys(out) if v != s]
    if isinstance(node, ast.List | ast.Tuple) and node.elts:
        kind = type(node)
        return [kind(elts=node.elts[:-1], ctx=ast.Load()), kind(elts=node.elts[::-1], ctx=ast.Load())]
    return []


def _digits_up(s: str) -> str:
    return "".join(str((int(c) + 1) % 10) if c.isdigit() else c for c in s)


def _replace_at(call: ast.Call, at: int, value: ast.expr) -> ast.Call:
    """A copy of `call` with its `at`-th argument node (in `_variants`' walk order) replaced."""
    new = copy.deepcopy(call)
    parts = [(a, new) for a in new.args] + [(k.value, k) for k in new.keywords]
    spots = [pair for part, top in parts for pair in _walk_with_parents(part, top)]
    parent, old = spots[at]
    for name, value_now in ast.iter_fields(parent):
        if value_now is old:
            setattr(parent, name, value)
            return new
        if isinstance(value_now, list):
            for i, item in enumerate(value_now):
                if item is old:
                    value_now[i] = value
                    return new
    return new


def _walk_with_parents(node: ast.AST, top: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
    """`ast.walk`'s order, each node with its parent (`top` for the argument itself)."""
    parents = {id(node): top}
    for sub in ast.walk(node):
        for child in ast.iter_child_nodes(sub):
            parents[id(child)] = sub
        yield parents[id(sub)], sub


def _interleaved(groups: list[list[str]]) -> list[str]:
    out: list[str] = []
    for turn in range(max((len(g) for g in groups), default=0)):
        out += [g[turn] for g in groups if turn < len(g)]
    return list(dict.fromkeys(out))[:MAX_PROBES]


RESULTS = "[probes] "


def answers(output: str) -> list[str] | None:
    """The answers a probe run printed (`probe_run.py`); None where it never got there."""
    for line in reversed(output.splitlines()):
        if line.startswith(RESULTS):
            try:
                found = json.loads(line[len(RESULTS) :])
            except ValueError:
                return None
            return found if isinstance(found, list) else None
    return None


def agreed(answered: list[list[str] | None]) -> int:
    """Which of the candidates (their answers, in the order they passed) agrees with the others
    on the most probes, counted over every other candidate; the first on a tie, and where fewer
    than two answered."""
    scores = []
    for i, mine in enumerate(answered):
        if mine is None:
            scores.append(-1)
            continue
        score = 0
        for j, theirs in enumerate(answered):
            if j != i and theirs is not None and len(theirs) == len(mine):
                score += sum(a == b for a, b in zip(mine, theirs, strict=True))
        scores.append(score)
    return max(range(len(answered)), key=lambda i: (scores[i], -i)) if answered else 0
