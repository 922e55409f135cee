"""Sessions from inside the UI: start a fresh one (`/clear`), pick up a stored one (`/resume`), and
the net change the agent made in this session (`/diff`).

The connection to the model stays open across a switch; only the conversation, its stored record
and its undo history change.
"""

from __future__ import annotations

from whiz.agent.editing.edits import FileChange, unified_diff
from whiz.agent.store.sessions import SessionInfo, TurnRecord
from whiz.modes.session import AgentSession


def start_new(session: AgentSession) -> SessionInfo:
    """Leave the current conversation (it stays stored) and start an empty one."""
    settings = dict(session.info.settings)
    info = session.store.create(session.agent.ws.root, settings=settings)
    session.switch_to(info, [])
    return info


def resume(session: AgentSession, wanted: str) -> SessionInfo | None:
    """Switch to the stored session whose id is (or starts with) `wanted`; None if there is none
    (or more than one matches) in this workspace. `SetupError` when another whiz has it open."""
    matches = [info for info in recent(session) if info.id == wanted or info.id.startswith(wanted)]
    if len(matches) != 1:
        return None
    info = matches[0]
    session.switch_to(info, session.store.items(info.id))
    return info


def recent(session: AgentSession, limit: int = 20) -> list[SessionInfo]:
    """This workspace's sessions, latest first."""
    return session.store.list(session.agent.ws.root, limit=limit)


def turns(session: AgentSession, info: SessionInfo) -> list[TurnRecord]:
    return session.store.turns(info.id)


def net_diff(session: AgentSession) -> str:
    """The unified diff from before the agent's (undoable) changes in this session to the files now."""
    ws = session.agent.ws
    diffs = []
    for path, before in sorted(session.undo_store.originals().items()):
        now = ws.read_text(path) if ws.resolve(path).is_file() else None
        if now != before:
            diffs.append(unified_diff(FileChange(path, before, now)))
    return "".join(diffs)
