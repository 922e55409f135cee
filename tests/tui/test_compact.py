"""The context window in the UI: the status line shows how full it is, `/compact` shrinks the
conversation on demand and says what it did, and `/resume` of a session another whiz holds is
refused with the reason."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.agent.context.test_compaction import data_file, reader
from tests.tui.test_modes import code_app, status_line
from whiz.agent.config import AgentConfig
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import AgentSession, SessionOptions


def context_percent(app) -> int:
    found = re.search(r" · ctx (\d+)%", status_line(app))
    assert found, status_line(app)
    return int(found.group(1))


async def test_compact_shrinks_the_conversation_and_the_status_line_shows_it(tmp_path: Path):
    model = ScriptedModel([reader] * 20, context_window=16000)
    async with code_app(tmp_path, ScriptedPool.of(model)) as (app, screen):
        for i in range(3):
            (app.session.agent.ws.root / f"data{i}.txt").write_text(data_file(i))
        empty = context_percent(app)
        for i in range(3):
            await app._run_turn(f"Read data{i}.txt please")
        full = context_percent(app)
        assert full > empty + 20
        screen.new()

        await app.commands.run("/compact")

        said = " ".join(screen.new().split())  # unwrapped
        assert re.search(r"⤓ context compacted \(.*\): about \d+ -> \d+ tokens of a 16000-token window", said)
        assert context_percent(app) < full * 0.7
        await app._run_turn("Read data2.txt please")  # the conversation goes on
        assert "I read it." in screen.new()


async def test_compact_of_a_short_conversation_changes_nothing(tmp_path: Path):
    model = ScriptedModel(["Hi."], context_window=16000)
    async with code_app(tmp_path, ScriptedPool.of(model)) as (app, screen):
        await app._run_turn("hello")
        before = list(app.session.agent.items)
        await app.commands.run("/compact")
        assert "nothing to compact yet" in screen.new()
        assert app.session.agent.items == before


async def test_compact_without_a_known_window_says_so(tmp_path: Path):
    async with code_app(tmp_path, ScriptedPool.of(ScriptedModel(["Hi."]))) as (app, screen):
        assert "ctx" not in status_line(app)
        await app.commands.run("/compact")
        assert "the model's context window is not known" in screen.new()


async def test_resume_of_a_session_open_in_another_whiz_is_refused(tmp_path: Path):
    root = tmp_path / "project"
    root.mkdir()
    other = await AgentSession.open(
        SessionOptions(root, agent=AgentConfig(), home=tmp_path / "home"),
        pool=ScriptedPool.of(ScriptedModel([])),
    )
    try:
        async with code_app(tmp_path, ScriptedPool.of(ScriptedModel([]))) as (app, screen):
            mine = app.session.id
            await app.commands.run(f"/resume {other.id}")
            assert f"session {other.id} is open in another whiz (pid {os.getpid()})" in screen.new()
            assert app.session.id == mine
    finally:
        await other.close()
