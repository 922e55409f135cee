"""Rewrites made to change one line (forced changes).

Asked to fix a function it sees nothing wrong in, a small model writes it back as it is, draw after
draw, whatever it is told of the failure. Begun for it instead, the function's lines up to one of
its statements and then a comment `# Fix:` at that statement's indent, its reply has to say what to
change there, and it writes that change and the rest of the function. One greedy draw per
statement gives that many different changes, each a short decode: the prompt is the rewrite's
own, already in the server's cache, and the function's tail is copied from the prediction. The
round has a time limit of its own (`FORCED_S`), so that the sampled rewrites after it keep theirs.

`forcings(place, messages, ran)` lists the draws for a place: the statements the failing call ran first (a
change of a line it never runs cannot change what it does), then the others, top to bottom;
`unmarked(text, forcing)` takes the comment out of a reply, so that what is applied is the change
alone."""

from __future__ import annotations

import ast
import asyncio
import textwrap
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from whiz.modes.candidates import CandidateSource, CandidateStream, Draw, relay
from whiz.modes.localize import Localization
from whiz.modes.repair import rewrite_tokens

MARK = "# Fix:"
FORCED = 6
"""Draws of one heal at most, the statements the failing call ran first; all go at once, and the
engine decodes them together (eight took half a minute of a 2-core CPU)."""
FORCED_S = 25.0
"""The longest a round of them may take, of the heal's time budget: the sampled rewrites after it
need the rest."""
FENCE = "```python\n"


@dataclass(frozen=True)
class Forcing:
    """One forced draw: the place, the statement's line (1-based in the function's source) and
    the reply's start, which ends in the mark at that line's indent."""

    place: Localization
    line: int
    start: str
    rest: str = ""
    """The function from that line on, and the fence's end: what the reply is expected to copy
    once its change is written (its prediction)."""
    messages: tuple[dict[str, Any], ...] = ()
    """The conversation the reply is begun in: the place's first rewrite's, whose prompt the
    server has cached."""


def statement_lines(source: str) -> list[int]:
    """The lines (1-based) where the function's statements begin, the docstring's and the `def`
    line's left out; nothing where the source does not parse."""
    body = textwrap.dedent(source)
    try:
        tree = ast.parse(body)
    except (SyntaxError, ValueError):
        return []
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef | ast.AsyncFunctionDef):
        return []
    fn = tree.body[0]
    first = fn.body[0]
    docstring = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    lines = {
        node.lineno
        for node in ast.walk(fn)
        if isinstance(node, ast.stmt) and node is not fn and not (docstring and node is first)
    }
    return sorted(lines)


def forcings(
    place: Localization,
    messages: list[dict[str, Any]],
    ran: Collection[int] | None = None,
    limit: int = FORCED,
) -> list[Forcing]:
    """Up to `limit` forced draws of `place`, begun in `messages`: at the statements in `ran`
    first (lines of the function's source, 1-based), then at the others."""
    fn = place.function
    if fn.kind != "function":
        return []
    body = textwrap.dedent(fn.source)
    lines = body.splitlines(keepends=True)
    statements = statement_lines(fn.source)
    order = sorted(statements, key=lambda k: (ran is not None and k not in ran, k))
    out = []
    for k in order[:limit]:
        text = lines[k - 1]
        indent = text[: len(text) - len(text.lstrip())]
        start = FENCE + "".join(lines[: k - 1]) + indent + MARK
        out.append(Forcing(place, k, start, "".join(lines[k - 1 :]) + "```", tuple(messages)))
    return out


def unmarked(text: str, forcing: Forcing) -> str:
    """A forced reply without the comments of the mark, the one it was begun with and any more
    the model wrote after it, so that what is applied is the change alone; a comment of the
    mark's the function already had stays."""
    if MARK in forcing.place.function.source:
        lines = text.split("\n")
        at = forcing.start.count("\n")  # the mark's line: after the fence and the lines before it
        return "\n".join(line for i, line in enumerate(lines) if i != at)
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(MARK))


def forced_stream(source: CandidateSource, forced: list[Forcing]) -> CandidateStream:
    """One stream of the forced draws, each its own greedy request begun with its start; they run
    at once, and the engine decodes them together."""

    async def one(out: CandidateStream, index: int) -> None:
        forcing = forced[index]
        fn = forcing.place.function
        draw = Draw(1, 0.0, rewrite_tokens(fn), prediction=forcing.rest, start=forcing.start)
        await relay(out, source.stream(list(forcing.messages), draw), [index])

    async def produce(out: CandidateStream) -> None:
        await asyncio.gather(*(one(out, i) for i in range(len(forced))))

    return CandidateStream(len(forced), produce, "forced")
