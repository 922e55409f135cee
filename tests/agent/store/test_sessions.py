"""Sessions in SQLite: migrations, the stored conversation, resume and undo through the session."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.agent.conftest import GREET, sr
from whiz.agent.config import AgentConfig
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.agent.store.sessions import MIGRATIONS, SessionStore
from whiz.commands.sessions import undo_last
from whiz.modes.endpoints import SetupError
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import AgentSession, SessionOptions


def test_migrations_run_once_and_record_the_version(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    SessionStore(db).close()
    store = SessionStore(db)  # opening again runs nothing new
    store.close()
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_items_are_appended_and_sessions_found_per_workspace(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.db")
    a = store.create(tmp_path / "a")
    b = store.create(tmp_path / "b")
    store.save(a.id, [{"n": 1}])
    store.save(a.id, [{"n": 1}, {"n": 2}])
    assert store.items(a.id) == [{"n": 1}, {"n": 2}]
    assert store.latest(tmp_path / "b").id == b.id
    assert store.latest(tmp_path / "a").id == a.id
    assert store.latest(tmp_path / "c") is None


async def test_resume_continues_the_conversation(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = ScriptedModel(["greet.py says hello."])
    session = await AgentSession.open(SessionOptions(project, home=home), pool=ScriptedPool.of(first))
    assert (await session.run("What does greet.py do?")).ok
    await session.close()

    second = ScriptedModel(["Still hello."])
    resumed = await AgentSession.open(
        SessionOptions(project, home=home, resume="last"), pool=ScriptedPool.of(second)
    )
    assert resumed.id == session.id
    assert (await resumed.run("And now?")).ok
    await resumed.close()
    texts = [i.get("content") for i in second.requests[0].items]
    assert "greet.py says hello." in texts and texts[-1] == "And now?"
    store = SessionStore(home / "sessions.db")
    assert [t.task for t in store.turns(session.id)] == ["What does greet.py do?", "And now?"]


async def test_resume_without_a_session_is_a_clear_error(project: Path, tmp_path: Path) -> None:
    try:
        await AgentSession.open(
            SessionOptions(project, home=tmp_path, resume="last"), pool=ScriptedPool.of(ScriptedModel([]))
        )
    except SetupError as exc:
        assert "no session to resume" in exc.message
    else:
        raise AssertionError("expected SetupError")


async def test_whiz_undo_restores_the_latest_turn(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    model = ScriptedModel([sr("greet.py", '    return "Hello, " + name', '    return "Hi, " + name')])
    session = await AgentSession.open(SessionOptions(project, home=home), pool=ScriptedPool.of(model))
    assert (await session.run("rename")).ok
    await session.close()
    assert (project / "greet.py").read_text() != GREET
    session_id, paths = undo_last(project, home=home)
    assert session_id == session.id and paths == ["greet.py"]
    assert (project / "greet.py").read_text() == GREET
    assert undo_last(project, home=home) is None  # nothing left to undo
    # The model hears about it when the session is resumed.
    items = SessionStore(home / "sessions.db").items(session.id)
    assert "undid" in items[-1]["content"]


async def test_resume_keeps_the_action_format_unless_told(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = await AgentSession.open(
        SessionOptions(project, home=home, agent=AgentConfig(actions="tools")),
        pool=ScriptedPool.of(ScriptedModel(["hi"])),
    )
    await first.run("hello")
    await first.close()
    again = await AgentSession.open(
        SessionOptions(project, home=home, resume="last"), pool=ScriptedPool.of(ScriptedModel([]))
    )
    assert again.agent.config.actions == "tools"
    await again.close()
    told = await AgentSession.open(
        SessionOptions(project, home=home, resume="last", agent=AgentConfig(actions="text")),
        pool=ScriptedPool.of(ScriptedModel([])),
    )
    assert told.agent.config.actions == "text"
    await told.close()
