"""A turn's rename done exactly (`editing/rename.py`), before the model is asked at all."""

from __future__ import annotations

from typing import Any, Protocol

from whiz.agent.config import AgentConfig
from whiz.agent.editing.rename import exact_rename
from whiz.agent.events import Emitter
from whiz.agent.project.workspace import Workspace
from whiz.agent.tools import ApplyEdits, Toolbox
from whiz.agent.turns import Progress


class RenamingAgent(Protocol):
    """The agent as a rename sees it (`loop.Agent`): what it edits with, and how a turn ends."""

    ws: Workspace
    tools: Toolbox
    config: AgentConfig
    emit: Emitter
    items: list[dict[str, Any]]
    progress: Progress

    async def finish_edits(self, changed: list[str], summary: str = "") -> None:
        """Edits applied: the turn ends, once the tests (if set) pass."""
        ...


async def rename_exactly(agent: RenamingAgent, task: str, wanted: bool) -> None:
    """Do the rename `task` asks for on the code's tokens, where its meaning is plain (and a change
    is `wanted`: not in read-only, and not where the config turns exact renames off).

    It applies as any edit does (the session's approvals, undo) and is said as the model would
    say it, so the conversation reads as if the model had made it; then the turn ends as after
    any edit (`Agent.finish_edits` raises `Submitted`), once the tests pass if there are any. It
    returns, and the model is asked as without it, where the rename is not plain, was declined
    or could not apply, or the tests fail on it (the model is told how).
    """
    rename = exact_rename(agent.ws, task) if wanted and agent.config.exact_renames else None
    if rename is None:
        return
    outcome = await agent.tools.run(ApplyEdits(rename.edits))
    if not outcome.ok or not outcome.changed:
        return
    said = rename.summary()
    item = agent.emit.start("agent_message", text="")
    agent.emit.complete(item, text=said)
    agent.items.append({"type": "message", "role": "assistant", "content": said})
    agent.progress.changed += outcome.changed
    agent.progress.untested = True
    await agent.finish_edits(outcome.changed, said)
