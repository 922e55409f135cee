"""Sessions in SQLite under the whiz data home, so `whiz resume` can pick one up again.

A session is one conversation in one workspace: its items (what the model saw and said), its
turns (task, outcome, usage) and its settings. Schema changes are a plain list of migration
functions; `PRAGMA user_version` says how many have run.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs


def data_home() -> Path:
    """`$WHIZ_HOME` if set, else the user data dir (e.g. ~/.local/share/whiz)."""
    env = os.environ.get("WHIZ_HOME")
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir("whiz"))


def _v1(db: sqlite3.Connection) -> None:
    db.executescript(
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            workspace TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            settings TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX sessions_by_workspace ON sessions (workspace, updated_at);
        CREATE TABLE items (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            item TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        CREATE TABLE turns (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            task TEXT NOT NULL,
            status TEXT NOT NULL,
            message TEXT NOT NULL,
            usage TEXT NOT NULL DEFAULT '{}',
            changed TEXT NOT NULL DEFAULT '[]',
            ended_at REAL NOT NULL
        );
        """
    )


def _v2(db: sqlite3.Connection) -> None:
    # The session log: routing decisions (mode changes, policy) and other notes beside the conversation.
    db.executescript(
        """
        CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            at REAL NOT NULL,
            type TEXT NOT NULL,
            data TEXT NOT NULL
        );
        CREATE INDEX events_by_session ON events (session_id, at);
        """
    )


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2]


@dataclass
class SessionInfo:
    id: str
    workspace: str
    created_at: float
    updated_at: float
    title: str
    settings: dict[str, Any]


@dataclass
class TurnRecord:
    id: str
    task: str
    status: str
    message: str
    changed: list[str]
    ended_at: float
    usage: dict[str, Any] = field(default_factory=dict)


class SessionStore:
    """The sessions database. Every method opens its own short transaction."""

    def __init__(self, path: Path | None = None):
        self.path = path or data_home() / "sessions.db"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.execute("PRAGMA foreign_keys = ON")
        self.migrate()

    def close(self) -> None:
        self._db.close()

    def migrate(self) -> None:
        """Run the migrations this database has not had yet."""
        done = self._db.execute("PRAGMA user_version").fetchone()[0]
        for number, migration in enumerate(MIGRATIONS[done:], start=done + 1):
            with self._db:
                migration(self._db)
                self._db.execute(f"PRAGMA user_version = {number}")

    def create(
        self, workspace: Path, *, title: str = "", settings: dict[str, Any] | None = None
    ) -> SessionInfo:
        now = time.time()
        info = SessionInfo(
            "sess_" + uuid.uuid4().hex[:16],
            str(Path(workspace).resolve()),
            now,
            now,
            title[:200],
            settings or {},
        )
        with self._db:
            self._db.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?)",
                (info.id, info.workspace, now, now, info.title, json.dumps(info.settings)),
            )
        return info

    def save(
        self,
        session_id: str,
        items: list[dict[str, Any]],
        turn: TurnRecord | None = None,
        *,
        rewrite: bool = False,
    ) -> None:
        """Store the conversation (appending the items not stored yet; all of them anew with
        `rewrite`, after compaction changed earlier ones) and the turn that ended."""
        with self._db:
            if rewrite:
                self._db.execute("DELETE FROM items WHERE session_id = ?", (session_id,))
            stored = self._db.execute(
                "SELECT COUNT(*) FROM items WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            self._db.executemany(
                "INSERT INTO items VALUES (?, ?, ?)",
                [
                    (session_id, seq, json.dumps(item))
                    for seq, item in enumerate(items[stored:], start=stored)
                ],
            )
            if turn is not None:
                self._db.execute(
                    "INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        turn.id,
                        session_id,
                        turn.task,
                        turn.status,
                        turn.message,
                        json.dumps(turn.usage),
                        json.dumps(turn.changed),
                        turn.ended_at,
                    ),
                )
            self._db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time(), session_id))

    def update_settings(self, session_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Merge `changes` into the session's stored settings (what a resume restores); returns them all."""
        with self._db:
            row = self._db.execute("SELECT settings FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                return {}
            settings = {**json.loads(row[0]), **changes}
            self._db.execute(
                "UPDATE sessions SET settings = ? WHERE id = ?", (json.dumps(settings), session_id)
            )
        return settings

    def log_event(self, session_id: str, type_: str, data: dict[str, Any]) -> None:
        """Add an entry to the session log (a routing decision, say)."""
        with self._db:
            self._db.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?)", (session_id, time.time(), type_, json.dumps(data))
            )

    def events(self, session_id: str) -> list[tuple[float, str, dict[str, Any]]]:
        """The session log, oldest first: (time, type, data)."""
        rows = self._db.execute(
            "SELECT at, type, data FROM events WHERE session_id = ? ORDER BY at, rowid", (session_id,)
        )
        return [(r[0], r[1], json.loads(r[2])) for r in rows]

    def get(self, session_id: str) -> SessionInfo | None:
        row = self._db.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return _info(row) if row else None

    def latest(self, workspace: Path | None = None) -> SessionInfo | None:
        """The most recently used session (in `workspace`, if given)."""
        if workspace is None:
            row = self._db.execute("SELECT * FROM sessions ORDER BY updated_at DESC LIMIT 1").fetchone()
        else:
            row = self._db.execute(
                "SELECT * FROM sessions WHERE workspace = ? ORDER BY updated_at DESC LIMIT 1",
                (str(Path(workspace).resolve()),),
            ).fetchone()
        return _info(row) if row else None

    def list(self, workspace: Path | None = None, limit: int = 20) -> list[SessionInfo]:
        where, args = ("WHERE workspace = ?", (str(Path(workspace).resolve()),)) if workspace else ("", ())
        rows = self._db.execute(
            f"SELECT * FROM sessions {where} ORDER BY updated_at DESC LIMIT ?", (*args, limit)
        )
        return [_info(r) for r in rows]

    def items(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT item FROM items WHERE session_id = ? ORDER BY seq", (session_id,))
        return [json.loads(r[0]) for r in rows]

    def turns(self, session_id: str) -> list[TurnRecord]:
        rows = self._db.execute(
            "SELECT id, task, status, message, changed, ended_at, usage FROM turns"
            " WHERE session_id = ? ORDER BY ended_at",
            (session_id,),
        )
        return [TurnRecord(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], json.loads(r[6])) for r in rows]


def _info(row: tuple) -> SessionInfo:
    return SessionInfo(row[0], row[1], row[2], row[3], row[4], json.loads(row[5]))
