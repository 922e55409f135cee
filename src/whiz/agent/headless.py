"""`whiz exec`, `whiz resume` and `whiz undo` as library functions: the CLI only parses flags.

Exit codes: 0 the task was done, 1 it failed or was cancelled, 2 the agent could not start
(no server, a refused key, bad options).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from whiz.agent.events import Event
from whiz.agent.sessions import SessionStore, data_home
from whiz.agent.undo import UndoStore
from whiz.agent.workspace import Workspace

EXIT_DONE, EXIT_FAILED, EXIT_SETUP = 0, 1, 2


class HumanPrinter:
    """The plain-text view of the events: the model's words on stdout, everything else on stderr."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None):
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._line_open = False

    def __call__(self, event: Event) -> None:
        kind, item = event["type"], event.get("item") or {}
        if kind == "item.updated" and item.get("type") == "agent_message":
            self.out.write(event.get("delta", ""))
            self.out.flush()
            self._line_open = not event.get("delta", "").endswith("\n")
            return
        if kind == "item.completed" and item.get("type") == "agent_message" and self._line_open:
            self.out.write("\n")
            self._line_open = False
        if kind == "item.completed":
            self._item(item)
        elif kind == "turn.completed":
            t = event.get("timings") or {}
            tps = t.get("tokens_per_s")
            speed = f", {tps:g} tok/s" if tps else ""
            seconds = t.get("duration_ms", 0) / 1000
            if "candidates" in t:  # a heal: its work is candidates, not model calls
                work = f"{_plural(t['candidates'], 'candidate')} in {_plural(t.get('rounds', 1), 'round')}"
            else:
                work = f"{t.get('model_calls', 0)} model calls"
            self._say(f"done in {seconds:.1f} s, {work}{speed}")
        elif kind == "error":
            self._say(f"error: {event['message']}")

    def _item(self, item: dict) -> None:
        match item.get("type"):
            case "file_change":
                paths = ", ".join(c["path"] for c in item.get("changes", []))
                self._say(f"{item.get('status')}: edit {paths}")
                if item.get("status") == "completed":
                    self.err.write(item.get("diff", ""))
            case "command_execution":
                self._say(f"$ {item['command']}  ({item.get('status')}, exit {item.get('exit_code')})")
            case "tool_call":
                args = " ".join(str(v) for v in item.get("arguments", {}).values() if v is not None)
                self._say(f"{item['tool']} {args}")
            case "error":
                self._say(f"retrying: {item['message'].splitlines()[0]}")
            case "user_message":
                self._say(f"steering: {item['text']}")

    def _say(self, line: str) -> None:
        self.err.write(f"whiz: {line}\n")
        self.err.flush()


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
                note = (
                    f"(The user undid your last changes to {', '.join(restored)}; those files are as before.)"
                )
                store.save(
                    info.id, store.items(info.id) + [{"type": "message", "role": "user", "content": note}]
                )
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


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
