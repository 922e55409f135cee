"""A cheap look at what an edit wrote, before the turn ends: syntax errors and undefined names.

A small model's edit often applies cleanly and still breaks the file (a lost bracket, a name it
never imported). Running the tests would tell, but costs seconds and needs a test command; this
costs milliseconds. Python files are compiled and run through pyflakes (undefined names only:
unused imports are not errors); other languages are parsed with their tree-sitter grammar, where
an ERROR or missing node is a syntax error.
"""

from __future__ import annotations

import ast
from typing import Any

from whiz.agent.context.repomap import language_of, parser_for
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace

MAX_PROBLEMS_PER_FILE = 5


def check_files(ws: Workspace, paths: list[str]) -> list[str]:
    """Problems in the files at `paths`, one line each ("path:line: what"); [] when they look fine."""
    problems: list[str] = []
    parsers: dict[str, Any] = {}
    for path in dict.fromkeys(paths):
        try:
            text = ws.read_text(path)
        except (OSError, UnicodeDecodeError, WhizAgentError):
            continue  # deleted, or not text: nothing to check
        language = language_of(path)
        if language == "python":
            found = python_problems(path, text)
        elif language is not None:
            found = syntax_problems(path, text, parser_for(language, parsers))
        else:
            found = []
        problems += found[:MAX_PROBLEMS_PER_FILE]
    return problems


def python_problems(path: str, text: str) -> list[str]:
    """A syntax error, else the names used but never defined (pyflakes)."""
    try:
        tree = ast.parse(text, filename=path)
        compile(tree, path, "exec")
    except SyntaxError as exc:
        return [f"{path}:{exc.lineno or 0}: syntax error: {exc.msg}"]
    from pyflakes import checker, messages

    undefined = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)
    found = checker.Checker(tree, filename=path).messages
    return [
        f"{path}:{m.lineno}: {m.message % m.message_args}"
        for m in sorted(found, key=lambda m: m.lineno)
        if isinstance(m, undefined)
    ]


def syntax_problems(path: str, text: str, parser: Any | None) -> list[str]:
    """Where the tree-sitter parse of `text` failed: ERROR nodes and missing tokens."""
    if parser is None:
        return []
    root = parser.parse(text.encode("utf-8")).root_node
    if not root.has_error:
        return []
    found: list[str] = []
    stack = [root]
    while stack and len(found) < MAX_PROBLEMS_PER_FILE:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            what = f"missing {node.type}" if node.is_missing else "syntax error"
            found.append(f"{path}:{node.start_point[0] + 1}: {what}")
            continue
        if node.has_error:
            stack.extend(reversed(node.children))
    return found or [f"{path}: syntax error"]
