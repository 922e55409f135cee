"""/diff, /clear and /resume underneath: the net change of a session, and switching conversations."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.models.scripted_model import ScriptedModel
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import AgentSession, SessionOptions
from whiz.tui import sessions


def edit(old: str, new: str) -> str:
    return f"app.py\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"


async def open_session(project: Path, home: Path, replies: list[str]) -> AgentSession:
    options = SessionOptions(project, home=home)
    return await AgentSession.open(options, pool=ScriptedPool.of(ScriptedModel(replies)))


async def test_net_diff_covers_the_turns_undo_can_still_take_back(project: Path, tmp_path: Path):
    session = await open_session(
        project,
        tmp_path / "home",
        [
            edit("    return 1", "    return 2"),
            "NEW.md\n```\nhello\n```\n",
            edit("    return 2", "    return 3"),
        ],
    )
    try:
        assert sessions.net_diff(session) == ""
        assert (await session.run("make it 2")).ok
        assert (await session.run("add NEW.md")).ok
        assert (await session.run("make it 3")).ok
        diff = sessions.net_diff(session)
        assert "-    return 1\n+    return 3\n" in diff  # one net change, not two steps
        assert "--- /dev/null\n+++ b/NEW.md\n@@ -0,0 +1 @@\n+hello\n" in diff
        session.undo()
        diff = sessions.net_diff(session)
        assert "-    return 1\n+    return 2\n" in diff and "+++ b/NEW.md" in diff
        session.undo()
        assert "+++ b/NEW.md" not in sessions.net_diff(session)
        session.undo()
        assert sessions.net_diff(session) == ""
    finally:
        await session.close()


async def test_clear_starts_an_empty_conversation_and_resume_brings_the_old_one_back(
    project: Path, tmp_path: Path
):
    session = await open_session(project, tmp_path / "home", [edit("    return 1", "    return 2"), "ok"])
    try:
        assert (await session.run("make it 2")).ok
        first, items = session.id, list(session.agent.items)
        new = sessions.start_new(session)
        assert new.id != first and session.id == new.id
        assert session.agent.items == []
        assert session.undo() is None  # the new conversation has nothing to undo
        assert [info.id for info in sessions.recent(session)] == [new.id, first]
        assert sessions.resume(session, "sess_") is None  # ambiguous
        assert sessions.resume(session, first[:10]).id == first
        assert session.agent.items == items
        assert session.undo() == ["app.py"]
        assert (project / "app.py").read_text() == "def answer():\n    return 1\n"
    finally:
        await session.close()
