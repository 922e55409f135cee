"""A fix of one function the task names: asked for as that function, written once.

Told to change a file with SEARCH/REPLACE, a model fixing a function types it twice: the lines
as they are, then as they should be. For "Fix the bug in the function median in stats.py" the
edit is the function itself, so the turn's first message asks for it whole in one fence, and
the request's prediction is the function as it is: speculative decoding accepts its unchanged
lines, and the reply is about half as long. A fence that redefines a function of the workspace
is an edit already (`editing/definitions.py`).

Only where nothing else can be meant: the task asks for a fix (`_FIXING`) and nothing new
(`_ADDING`), and names exactly one function: a top-level one that one file defines, or a method,
named as `Class.method` or by a name that only one class's method has (and no file defines at
the top level). A method is asked for alone, out of its class, and written back in its place
(`definitions.method_edits`). A name two files define, or two classes, is left to the usual
edit blocks.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from whiz.agent.editing.definitions import workspace_definitions, workspace_methods
from whiz.agent.intent import change_kind
from whiz.agent.project.workspace import Workspace

_FIXING = re.compile(r"\b(?:fix|fixes|fixed|bug|bugs|buggy|broken|wrong|incorrect|correct|repair)\b", re.I)
_ADDING = re.compile(
    r"\b(?:add|adds|adding|create|creates|implement|implements|new|write|writes|rename|split|extract|move)\b",
    re.I,
)
_WORD = re.compile(r"[A-Za-z_]\w*")
_DOTTED = re.compile(r"\b([A-Za-z_]\w*)\.([A-Za-z_]\w*)\b")


@dataclass(frozen=True)
class NamedFix:
    """The function a task asks to have fixed: its file, its name and its source as it is."""

    path: str
    name: str
    source: str
    """As it is in its file (a method indented as in its class)."""
    owner: str = ""
    """The class of a method ("" for a function)."""

    @property
    def qualname(self) -> str:
        return f"{self.owner}.{self.name}" if self.owner else self.name

    def ask(self) -> str:
        """What the turn's first message adds: how the fix is to be written."""
        # Said as the repair's rewrites are asked (`modes/repair.py`): told plainly that the
        # code is wrong, a small model changes it; asked only for it whole, it often copies it.
        if self.owner:
            return (
                f"The method `{self.qualname}` above is wrong. Write the method `{self.name}` fixed, "
                "whole, alone (not its class), in one ```python block, with no file path before it "
                "and no SEARCH/REPLACE block."
            )
        return (
            f"`{self.name}` above is wrong. Write `{self.name}` fixed, whole, in one ```python "
            "block, with no file path before it and no SEARCH/REPLACE block."
        )

    def prediction(self) -> str:
        """What the reply is expected to look like: the function as it is (a method out of its
        class), in its fence."""
        return f"```python\n{textwrap.dedent(self.source)}\n```"


def named_fix(ws: Workspace, task: str) -> NamedFix | None:
    """The one function `task` asks to have fixed (see the module's doc), or None."""
    if change_kind(task) != "behaviour" or not _FIXING.search(task) or _ADDING.search(task):
        return None
    found = workspace_definitions(ws)
    methods = workspace_methods(ws)
    for owner, name in _DOTTED.findall(task):  # `Stack.pop`: that class's method
        # Only a method no other class has, and no file defines at the top level: written
        # alone, it goes back where its name alone says (`method_edits`).
        places = methods.get(name, [])
        if len(places) == 1 and places[0][1] == owner and name not in found:
            path, _, method = places[0]
            return NamedFix(path, name, method.text, owner)
    words = set(_WORD.findall(task))
    named = {word for word in words if word in found}
    owned = {word for word in words - named if len(methods.get(word, [])) == 1}
    if len(named) + len(owned) != 1:
        return None
    if owned:  # a name only one class's method has
        ((path, owner, method),) = methods[next(iter(owned))]
        return NamedFix(path, method.name, method.text, owner)
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
