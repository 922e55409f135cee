"""A stuck retry's view of the code: the functions it must change, shown without their bodies.

The 0.5B copies the code it is shown. Told that it wrote a function back unchanged, with the
failing assertion and its values in view, it wrote the same body again in every reply and every
sample (seven replies a turn, on every task where it happened). Shown the same message with the function's
header and `...` for its body, it wrote a body of its own in 12 of 12 samples. So once replies
have written the code back twice in a row, the next request shows the functions of the files
they wrote back that way (`Hollow.hide`), and a reply that writes such a header with `...` again
gets the body back (`Hollow.restore`): left out is not deleted.

Python only, by lines and indentation rather than a parse: the messages hold code in fences,
SEARCH/REPLACE blocks and snippets that need not parse on their own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from whiz.agent.errors import WhizAgentError
from whiz.agent.project.test_files import TestFiles
from whiz.agent.project.workspace import Workspace

PLACEHOLDER = "..."
"""The body shown in its place: valid Python, and what a reader takes for "left out"."""
MAX_HEADER_LINES = 20
_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(")
_DOCSTRING = re.compile(r"""^[rRuUbBfF]{0,2}("{3}|'{3})""")


@dataclass
class _Span:
    """One function in a list of lines: `start` its `def` line, `body` where its body begins
    (after the header and any docstring), `end` where the body ends (exclusive, before trailing
    blank lines)."""

    indent: str
    name: str
    start: int
    body: int
    end: int


@dataclass
class Hollow:
    """The functions a retry is shown without their bodies: name -> (the `def` line's indent, the
    body as it is in the workspace now, one line each without its ending)."""

    bodies: dict[str, tuple[str, list[str]]]

    @property
    def names(self) -> list[str]:
        return list(self.bodies)

    def hide(self, text: str) -> str:
        """`text` with the body of every function of these names replaced by `...`, wherever it
        appears (the task's attached file, an earlier reply, a snippet)."""
        return self._rewrite(
            text, lambda span, body, hidden: None if hidden else _indent_of(body) + PLACEHOLDER
        )

    def restore(self, text: str) -> str:
        """`text` with each body written as `...` under one of these functions' headers put back
        as it is in the workspace: a reply that copied the hidden function meant it unchanged."""

        def back(span: _Span, body: list[str], hidden: bool) -> str | None:
            if not hidden:
                return None
            was_indent, was = self.bodies[span.name]
            return "\n".join(_reindent(line, was_indent, span.indent) for line in was)

        return self._rewrite(text, back)

    def _rewrite(self, text: str, new_body: Callable[[_Span, list[str], bool], str | None]) -> str:
        """`text` with the body of each of these functions replaced by what `new_body` makes of
        it (told whether it is only the placeholder); None leaves it as it is."""
        lines = text.splitlines(keepends=True)
        for span in reversed(_spans(lines, self.bodies)):
            body = lines[span.body : span.end]
            new = new_body(span, body, [x.strip() for x in body if x.strip()] == [PLACEHOLDER])
            if new is not None:
                ending = "\n" if body[-1].endswith("\n") or span.end < len(lines) else ""
                lines[span.body : span.end] = [new + ending]
        return "".join(lines)

    def items(self, items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Conversation items with the bodies hidden in every message's text."""
        out = []
        for item in items:
            content = item.get("content")
            if isinstance(content, str):
                item = {**item, "content": self.hide(content)}
            elif isinstance(content, list):
                parts = [
                    {**p, "text": self.hide(p["text"])}
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                    else p
                    for p in content
                ]
                item = {**item, "content": parts}
            out.append(item)
        return out


def hollow(ws: Workspace, paths: Iterable[str], texts: Iterable[str], test_cmd: str = "") -> Hollow | None:
    """The functions of the Python files `paths` (test files left out) to show without bodies:
    those `texts` (the task, the failing tests' output) name, else all of them; only names that
    are defined once across the files, so a body written as `...` has one place to go back to.
    None when there is no such function."""
    tests = TestFiles(test_cmd) if test_cmd else None
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for path in dict.fromkeys(paths):
        if not path.endswith(".py") or (tests is not None and path in tests):
            continue
        try:
            lines = ws.read_text(path).splitlines()
        except (OSError, UnicodeDecodeError, WhizAgentError):
            continue
        for span in _spans(lines, None):
            found.setdefault(span.name, []).append((span.indent, lines[span.body : span.end]))
    once = {name: places[0] for name, places in found.items() if len(places) == 1}
    said = " ".join(texts)
    named = [name for name in once if re.search(rf"\b{re.escape(name)}\b", said)]
    chosen = named or [name for name in once if not name.startswith("test")]
    return Hollow({name: once[name] for name in chosen}) if chosen else None


def _spans(lines: list[str], names: Iterable[str] | None) -> list[_Span]:
    """The functions in `lines` (of these names; None: all), each with a body of its own."""
    wanted = None if names is None else set(names)
    spans = []
    i = 0
    while i < len(lines):
        match = _DEF.match(lines[i])
        if match is None or (wanted is not None and match.group(2) not in wanted):
            i += 1
            continue
        indent = match.group(1)
        body = _header_end(lines, i)
        if body is None:
            i += 1
            continue
        body = _docstring_end(lines, body, indent)
        end = body
        while end < len(lines) and (not lines[end].strip() or _deeper(lines[end], indent)):
            end += 1
        while end > body and not lines[end - 1].strip():
            end -= 1
        if end > body:
            spans.append(_Span(indent, match.group(2), i, body, end))
        i = max(end, i + 1)
    return spans


def _header_end(lines: list[str], start: int) -> int | None:
    """The line after a `def` header that begins at `start` (it may span lines); None for a
    one-line function (`def f(): return 1`) or a header that never closes."""
    depth = 0
    for j in range(start, min(len(lines), start + MAX_HEADER_LINES)):
        code = lines[j].split("#", 1)[0].rstrip()
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        if depth <= 0:
            return j + 1 if code.endswith(":") else None
    return None


def _docstring_end(lines: list[str], at: int, indent: str) -> int:
    """Past the docstring that opens a body at `at`, if there is one: it says what the function
    is for, which a reply written anew needs."""
    first = at
    while first < len(lines) and not lines[first].strip():
        first += 1
    if first >= len(lines) or not _deeper(lines[first], indent):
        return at
    opened = _DOCSTRING.match(lines[first].strip())
    if opened is None:
        return at
    quote = opened.group(1)
    rest = lines[first].strip()[opened.end() :]
    if quote in rest:
        return first + 1
    for j in range(first + 1, len(lines)):
        if quote in lines[j]:
            return j + 1
    return at


def _deeper(line: str, indent: str) -> bool:
    stripped = line.rstrip("\r\n")
    return stripped.startswith(indent) and len(stripped) > len(indent) and stripped[len(indent)] in " \t"


def _indent_of(body: list[str]) -> str:
    first = next(x for x in body if x.strip())
    return first[: len(first) - len(first.lstrip())]


def _reindent(line: str, was: str, now: str) -> str:
    if not line.strip():
        return ""
    return now + line[len(was) :] if line.startswith(was) else line
