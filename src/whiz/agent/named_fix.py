"""A fix of one function the task names: asked for as that function, written once.

Told to change a file with SEARCH/REPLACE, a model fixing a function types it twice: the lines
as they are, then as they should be. For "Fix the bug in the function median in stats.py" the
edit is the function itself, so the turn's first message asks for it whole in one fence, and
the request's prediction is the function as it is: speculative decoding accepts its unchanged
lines, and the reply is about half as long. A fence that redefines a function of the workspace
is an edit already (`editing/definitions.py`).

Only where nothing else can be meant: the task asks for a fix (`_FIXING`) and nothing new
(`_ADDING`), and names exactly one function, a top-level one that one file defines (a method, or
a name two files define, is left to the usual edit blocks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from whiz.agent.editing.definitions import workspace_definitions
from whiz.agent.intent import change_kind
from whiz.agent.project.workspace import Workspace

_FIXING = re.compile(r"\b(?:fix|fixes|fixed|bug|bugs|buggy|broken|wrong|incorrect|correct|repair)\b", re.I)
_ADDING = re.compile(
    r"\b(?:add|adds|adding|create|creates|implement|implements|new|write|writes|rename|split|extract|move)\b",
    re.I,
)
_WORD = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class NamedFix:
    """The function a task asks to have fixed: its file, its name and its source as it is."""

    path: str
    name: str
    source: str

    def ask(self) -> str:
        """What the turn's first message adds: how the fix is to be written."""
        # Said as the repair's rewrites are asked (`modes/repair.py`): told plainly that the
        # code is wrong, a small model changes it; asked only for it whole, it often copies it.
        return (
            f"`{self.name}` above is wrong. Write `{self.name}` fixed, whole, in one ```python "
            "block, with no file path before it and no SEARCH/REPLACE block."
        )

    def prediction(self) -> str:
        """What the reply is expected to look like: the function as it is, in its fence."""
        return f"```python\n{self.source}\n```"


def named_fix(ws: Workspace, task: str) -> NamedFix | None:
    """The one function `task` asks to have fixed (see the module's doc), or None."""
    if change_kind(task) != "behaviour" or not _FIXING.search(task) or _ADDING.search(task):
        return None
    found = workspace_definitions(ws)
    named = {word for word in _WORD.findall(task) if word in found}
    if len(named) != 1:
        return None
    (name,) = named
    places = found[name]
    if len(places) != 1:
        return None
    path, definition = places[0]
    if not definition.text.lstrip().startswith(("def ", "async def ", "@")):
        return None  # a class: its fix may be any of its methods
    return NamedFix(path, name, definition.text)


def framed(ws: Workspace, task: str, text: str, *, wanted: bool) -> tuple[str, str | None]:
    """The turn's first message, with the named fix's ask where there is one (`wanted`: the turn
    owes a change in text actions), and the first request's prediction (None: the usual one)."""
    fix = named_fix(ws, task) if wanted else None
    if fix is None:
        return text, None
    return f"{text}\n\n{fix.ask()}", fix.prediction()
