"""The checks a user already wrote for the function a task is about: found, never written.

Without a test command, the code itself often says what is right: the examples of a docstring
(`>>>` lines, which doctest runs, and lines such as `f(2) == 4` or `f(2) -> 4`), the asserts of
an `if __name__ == "__main__":` block that calls the function, and the repository's tests that
call it. `find_checks` reads them out of the workspace (by parsing, nothing runs here); the
runner (`found_checks_run.py`) runs them, and the turn uses them to choose among candidate
edits and to catch an edit that breaks them (`modes/found_turn.py`).

The function a task is about is one it names that the workspace defines outside its tests (in
the files the task names, where it names any); where it names none, the functions of the one
file it names, or the workspace's only function.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from whiz.agent.errors import WhizAgentError
from whiz.agent.project.test_files import TestFiles
from whiz.agent.project.workspace import Workspace

MAX_FILES = 2000
"""Workspace files looked at: a large repository's checks are found among its first files."""
MAX_FILE_CHARS = 200_000
MAX_TARGETS = 4
"""Functions a task may be about: more names in its prose are words, not the function."""
MAX_TESTS = 20
"""Repository tests of the targets that run (the first, by file and line): a check, not a suite."""
MAX_EXAMPLES = 20

FEW_FILES = 20
"""A workspace with this few source files is parsed whole: its only function may be the target."""

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEF = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
_ARROW = re.compile(
    r"^(?P<expr>.+?\))\s*(?:==>|==|=>|->|-->|→|➞|⟶|=|returns|should return|should be|gives)\s*"
    r"(?P<want>.+?)[.;,]?$"
)
"""A line of prose such as `f(2) == 4`, `f(2) -> 4`, `f(2) ==> 4`, `f(2) ➞ 4`, `f(2) = 4`,
`f([1, 2]) returns 3.`"""
_BULLET = re.compile(r"^(?:[-*•]\s+|e\.g\.\s*|example:\s*)", re.IGNORECASE)


@dataclass(frozen=True)
class Target:
    """A function a task is about: its file and its qualified name (`Class.method`)."""

    path: str
    name: str
    line: int


@dataclass(frozen=True)
class Check:
    """One check the user wrote. `where` names it (a file and line, or a pytest node id), `text`
    says what it checks in a line, and `data` is what the runner needs."""

    kind: str
    """doctest, example, main or test."""
    where: str
    text: str
    data: dict[str, Any] = field(default_factory=dict, compare=False)

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind, "where": self.where, "text": self.text, **self.data}


KIND_NAMES = {
    "doctest": ("docstring with doctests", "docstrings with doctests"),
    "example": ("docstring example", "docstring examples"),
    "main": ("__main__ block", "__main__ blocks"),
    "test": ("test", "tests"),
}


@dataclass
class FoundChecks:
    """What `find_checks` found: the functions the task is about and the checks of them."""

    targets: list[Target] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.checks)

    def only(self, wheres: set[str]) -> FoundChecks:
        """These checks, keeping those named in `wheres`."""
        return FoundChecks(self.targets, [c for c in self.checks if c.where in wheres])

    def label(self) -> str:
        """What the checks are, in a few words: "2 docstring examples of median, 1 test"."""
        counts: dict[str, int] = {}
        for check in self.checks:
            counts[check.kind] = counts.get(check.kind, 0) + 1
        names = ", ".join(t.name for t in self.targets)
        parts = [f"{k} {KIND_NAMES[kind][k != 1]}" for kind, k in counts.items()]
        return ", ".join(parts) + (f" of {names}" if names and parts else "")

    def spec(self, python: str | None = None) -> dict[str, Any]:
        """What the runner runs (`found_checks_run.command`); `python` runs the tests."""
        spec: dict[str, Any] = {"label": self.label(), "checks": [c.spec() for c in self.checks]}
        if python:
            spec["python"] = python
        return spec

    def item(self) -> list[dict[str, str]]:
        """The checks as an item's field: kind, where, text."""
        return [{"kind": c.kind, "where": c.where, "text": c.text} for c in self.checks]


def find_checks(ws: Workspace, task: str) -> FoundChecks:
    """The checks the workspace's code already has for the function `task` is about; empty when
    it names none the workspace defines, or none has a check. Only files that may matter are
    parsed: those defining a function the task names (or the files it names), and the test
    files that mention a target by name."""
    try:
        files = [p for p in ws.list_files(".", limit=MAX_FILES) if p.endswith(".py")]
    except (OSError, WhizAgentError):
        return FoundChecks()
    tests = TestFiles("")
    texts = {path: text for path in files if (text := _read(ws, path)) is not None}
    words = set(_WORD.findall(task))
    named = {p for p in texts if p not in tests and (_names(task, p) or _names(task, PurePosixPath(p).name))}
    few = sum(p not in tests for p in texts) <= FEW_FILES
    sources = {
        path: parsed
        for path, text in texts.items()
        if path not in tests and (path in named or few or words & set(_DEF.findall(text)))
        if (parsed := _parse(text)) is not None
    }
    targets = find_targets(sources, task)
    if not targets:
        return FoundChecks()
    checks: list[Check] = []
    for target in targets:
        node = _definition(sources[target.path][0], target.name)
        if node is not None:
            checks += docstring_checks(target, node)
    names = {t.name.split(".")[-1] for t in targets}
    for path in dict.fromkeys(t.path for t in targets):
        checks += main_checks(path, sources[path], {t.name.split(".")[-1] for t in targets if t.path == path})
    tested: list[Check] = []
    for path, text in texts.items():
        if path in tests and any(name in text for name in names) and (parsed := _parse(text)):
            tested += test_checks(path, parsed[0], names)
    return FoundChecks(targets, checks + tested[:MAX_TESTS])


def _read(ws: Workspace, path: str) -> str | None:
    if ws.is_secret(path):
        return None
    try:
        text = ws.read_text(path)
    except (OSError, WhizAgentError):
        return None
    return text if len(text) <= MAX_FILE_CHARS else None


def _parse(text: str) -> tuple[ast.Module, str] | None:
    try:
        return ast.parse(text), text
    except (SyntaxError, ValueError):
        return None


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Top-level functions and the methods of top-level classes, by qualified name."""
    found: list[tuple[str, Any]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            found += [
                (f"{node.name}.{sub.name}", sub)
                for sub in node.body
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
    return found


def _definition(tree: ast.Module, qualname: str):
    return next((node for name, node in _functions(tree) if name == qualname), None)


def find_targets(sources: dict[str, tuple[ast.Module, str]], task: str) -> list[Target]:
    """The functions `task` is about, among `sources` (the workspace's code outside its tests)."""
    words = set(_WORD.findall(task))
    named_files = [p for p in sources if _names(task, p) or _names(task, PurePosixPath(p).name)]
    among = named_files or list(sources)
    found = [
        Target(path, name, node.lineno)
        for path in among
        for name, node in _functions(sources[path][0])
        if name.split(".")[-1] in words and not name.split(".")[-1].startswith("__")
    ]
    if found:
        return found[:MAX_TARGETS]
    if len(named_files) == 1:
        everything = [Target(p, n, node.lineno) for p in named_files for n, node in _functions(sources[p][0])]
        return everything if len(everything) <= MAX_TARGETS else []
    everything = [Target(p, n, node.lineno) for p in sources for n, node in _functions(sources[p][0])]
    return everything if len(everything) == 1 else []


def _names(task: str, path: str) -> bool:
    return re.search(rf"(?<![\w/.-]){re.escape(path)}(?![\w/-])", task) is not None


def docstring_checks(target: Target, node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[Check]:
    """The docstring's doctests (one check: later lines may use earlier ones) and its example lines
    that are not doctests (`f(2) == 4`, `f(2) -> 4`), one check each."""
    doc = ast.get_docstring(node)
    if not doc or not node.body:
        return []
    # Where the docstring's first line is in the file: cleaning it dropped its leading blank lines.
    raw = node.body[0].value.value if isinstance(node.body[0], ast.Expr) else ""
    lead = 0
    for raw_line in str(raw).splitlines():
        if raw_line.strip():
            break
        lead += 1
    first = node.body[0].lineno + lead
    checks: list[Check] = []
    if ">>>" in doc:
        data = {"file": target.path, "name": target.name, "doc": doc, "line": first - 1}
        text = f"the doctests in {target.name}'s docstring"
        at = first + next(i for i, line in enumerate(doc.splitlines()) if ">>>" in line)
        checks.append(Check("doctest", f"{target.path}:{at}", text, data))
    simple = target.name.split(".")[-1]
    if "." in target.name:
        return checks  # a method's examples need an object the docstring does not build
    in_doctest = False
    for offset, raw in enumerate(doc.splitlines()):
        line = raw.strip()
        if line.startswith(">>>") or line.startswith("..."):
            in_doctest = True
            continue
        if in_doctest and line:  # a doctest's expected output
            continue
        in_doctest = False
        example = example_line(_BULLET.sub("", line.strip("`")), simple)
        if example is not None and len(checks) < MAX_EXAMPLES:
            expr, want = example
            data = {"file": target.path, "expr": expr, "want": want}
            checks.append(Check("example", f"{target.path}:{first + offset}", f"{expr} == {want}", data))
    return checks


def example_line(line: str, name: str) -> tuple[str, str] | None:
    """(call, expected) where `line` says what a call of `name` gives, both Python expressions."""
    if not line.startswith(f"{name}("):
        return None
    found = _ARROW.match(line)
    if found is None:
        return None
    expr, want = found["expr"].strip(), found["want"].strip().strip("`")
    for text in (expr, want):
        try:
            compile(text, "<example>", "eval")
        except SyntaxError:
            return None
    return expr, want


def main_checks(path: str, parsed: tuple[ast.Module, str], names: set[str]) -> list[Check]:
    """The file's `if __name__ == "__main__":` block, where it asserts something of the function
    and asks for no input: it runs with the module's names, as `python FILE` would run it."""
    tree, text = parsed
    lines = text.splitlines()
    for node in tree.body:
        if not (isinstance(node, ast.If) and _is_main_test(node.test)):
            continue
        inside = list(ast.walk(ast.Module(body=node.body, type_ignores=[])))
        asserts = any(isinstance(n, ast.Assert) for n in inside)
        called = {n.func.id for n in inside if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        if not asserts or not (called & names) or "input" in called:
            return []
        start, end = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
        source = textwrap.dedent("\n".join(lines[start - 1 : end])) + "\n"
        data = {"file": path, "source": source, "line": start}
        return [Check("main", f"{path}:{node.lineno}", f"the asserts of {path}'s __main__ block", data)]
    return []


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, *test.comparators]
    named = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
    return named and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def test_checks(path: str, tree: ast.Module, names: set[str]) -> list[Check]:
    """The tests in a test file that call one of `names`, as pytest node ids."""
    found: list[Check] = []

    def uses(node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in names:
                return True
            if isinstance(sub, ast.Attribute) and sub.attr in names:
                return True
        return False

    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            if uses(node):
                found.append(Check("test", f"{path}::{node.name}", f"{path}::{node.name}"))
        elif isinstance(node, ast.ClassDef) and (node.name.startswith("Test") or _is_testcase(node)):
            for sub in node.body:
                is_test = isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and sub.name.startswith(
                    "test"
                )
                if is_test and uses(sub):
                    where = f"{path}::{node.name}::{sub.name}"
                    found.append(Check("test", where, where))
    return found


def _is_testcase(node: ast.ClassDef) -> bool:
    return any(
        (isinstance(b, ast.Attribute) and b.attr == "TestCase")
        or (isinstance(b, ast.Name) and b.id == "TestCase")
        for b in node.bases
    )
