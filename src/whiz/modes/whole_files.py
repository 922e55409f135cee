"""Whole-file answers as edits, for agents whose work a check decides (swarm workers).

Small models often answer an edit request with the whole file in a fence ("shapes.py:" and a
code block) instead of a SEARCH/REPLACE block. The interactive agent rightly reads that as a
quote, not an edit. A swarm worker is different: it works in a throwaway copy, on files the plan
names, and its micro-task only counts when its check passes. So for a worker, a fenced file
among its own files is taken as that file's new text: `WholeFileEdits` rewrites such a reply
into SEARCH/REPLACE blocks before the agent reads it.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from whiz.agent.editing.actions import parse_edits
from whiz.agent.editing.edits import EditError, WholeFile, plan_edits
from whiz.agent.errors import WhizAgentError
from whiz.agent.models.seam import (
    Finished,
    ModelClient,
    ModelEvent,
    ModelRequest,
    ModelText,
    ModelToolCall,
    WrappedModel,
    output_items,
)
from whiz.agent.project.workspace import Workspace
from whiz.modes.heal_results import as_search_replace

_FENCE = re.compile(r"^```[^\n`]*\n(.*?)^```[ \t]*$", re.S | re.M)
# A fence with the path line above it, if there is one.
_NAMED_FENCE = re.compile(r"(?:^[^\n]*\S[^\n]*\n\s*)?^```[^\n`]*\n.*?^```[ \t]*$", re.S | re.M)


def whole_files_as_edits(text: str, ws: Workspace, files: list[str]) -> str:
    """`text` with its fenced whole files (of `files` only) added as SEARCH/REPLACE blocks; `text`
    unchanged when it has edit blocks of its own, or no such files. A task of one file may get
    its file back in a single fence with no path above it."""
    try:
        if parse_edits(text):
            return text
        found = [
            e for e in parse_edits(text, whole_files=True) if isinstance(e, WholeFile) and e.path in files
        ]
        fences = _FENCE.findall(text)
        if not found and len(files) == 1 and len(fences) == 1:
            found = [WholeFile(files[0], fences[0])]  # one unnamed file for a task of one file
        changes = plan_edits(ws, found) if found else []
    except (EditError, WhizAgentError):
        return text
    blocks = "".join(as_search_replace(c) for c in changes if c.before != c.after)
    if not blocks:
        return text
    # The fences go: the agent must act on the blocks alone, not also on the files they came from
    # (nor on quoted files outside the task, such as its tests).
    prose = _NAMED_FENCE.sub("", text).strip()
    return f"{prose}\n\n{blocks}" if prose else blocks


class WholeFileEdits(WrappedModel):
    """A `ModelClient` that hands the agent whole-file answers as edit blocks (see above).

    The reply is passed on in one piece when it is finished, since it may be rewritten.
    """

    def __init__(self, inner: ModelClient, ws: Workspace, files: list[str]):
        super().__init__(inner)
        self.ws = ws
        self.files = list(files)

    async def respond(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        text, calls = "", []
        async for event in self.inner.respond(request):
            if isinstance(event, ModelText):
                text += event.text
            elif isinstance(event, ModelToolCall):
                calls.append(event)
            elif isinstance(event, Finished):
                if event.status == "completed":
                    text = whole_files_as_edits(text, self.ws, self.files)
                if text:
                    yield ModelText(text)
                for call in calls:
                    yield call
                # The conversation keeps the reply as the model wrote it (and as the server holds
                # it, so the next call still chains); only what the agent acts on is rewritten.
                items = event.output_items or output_items(text, calls)
                yield Finished(event.status, items, event.usage, event.timings, event.error)
