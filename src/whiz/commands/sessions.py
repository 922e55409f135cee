"""`whiz undo` and the session list of `whiz resume`, as library functions."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.editing.undo import UndoStore
from whiz.agent.project.workspace import Workspace
from whiz.agent.store.sessions import SessionStore, data_home
from whiz.modes.session import undo_note


def undo_last(workspace: Path, *, home: Path | None = None) -> tuple[str, list[str]] | None:
    """Undo the latest turn that changed files in `workspace`: (session id, paths restored)."""
    home = home or data_home()
    store = SessionStore(home / "sessions.db")
    try:
        for info in store.list(workspace, limit=50):
            undone = UndoStore(home / "undo" / info.id).undo(Workspace(workspace))
            if undone is None:
                continue
            restored = undone.restored
            if restored:
                note = {"type": "message", "role": "user", "content": undo_note(restored, undone.merged)}
                store.save(info.id, store.items(info.id) + [note])
                return info.id, restored
        return None
    finally:
        store.close()


def list_sessions(workspace: Path | None, *, home: Path | None = None) -> list[tuple[str, float, str, int]]:
    """(id, updated_at, first task, turns) of recent sessions, newest first."""
    home = home or data_home()
    store = SessionStore(home / "sessions.db")
    try:
        rows = []
        for info in store.list(workspace):
            turns = store.turns(info.id)
            rows.append((info.id, info.updated_at, turns[0].task if turns else "", len(turns)))
        return rows
    finally:
        store.close()
