"""A stored session too long for the model's window is compacted when resumed instead of failing,
and the compacted conversation is what is stored; one process at a time holds a session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.context.test_compaction import data_file, reader, tokens
from whiz.agent.config import AgentConfig
from whiz.agent.events import Collector
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.agent.store.sessions import SessionStore
from whiz.modes.endpoints import SetupError
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import AgentSession, SessionOptions

WINDOW = 4000


async def open_session(
    project: Path, model: ScriptedModel, *, resume: str | None = None, sink=None
) -> AgentSession:
    options = SessionOptions(
        project,
        agent=AgentConfig(max_output_tokens=256, map_tokens=64),
        home=project.parent / "home",
        resume=resume,
    )
    return await AgentSession.open(options, pool=ScriptedPool.of(model), sink=sink or (lambda e: None))


def stored_items(project: Path, session_id: str) -> list[dict]:
    store = SessionStore(project.parent / "home" / "sessions.db")
    try:
        return store.items(session_id)
    finally:
        store.close()


async def test_a_resumed_session_too_long_for_the_window_is_compacted_and_stored_so(project: Path) -> None:
    for i in range(8):
        (project / f"data{i}.txt").write_text(data_file(i))
    session = await open_session(project, ScriptedModel([reader] * 50))  # no window known: it grows
    for i in range(8):
        assert (await session.run(f"Read data{i}.txt please")).ok
    session_id = session.id
    await session.close()
    assert sum(len(str(i)) for i in stored_items(project, session_id)) / 4 > 3 * WINDOW

    model = ScriptedModel([reader] * 10, context_window=WINDOW)
    events = Collector()
    resumed = await open_session(project, model, resume=session_id, sink=events)
    try:
        result = await resumed.run("What did you read last?")
    finally:
        await resumed.close()

    assert result.ok and result.message == "I read it."
    assert all(tokens(r) + (r.max_output_tokens or 0) <= WINDOW for r in model.requests)
    (compacted,) = events.items("context_compacted")
    assert compacted["before_tokens"] > WINDOW > compacted["after_tokens"]
    items = stored_items(project, session_id)
    assert items == resumed.agent.items  # the store holds the compacted conversation, not the old one
    assert "Read data0.txt please" in items[0]["content"]  # the tasks of the turns before survive


async def test_a_second_opener_of_a_session_is_refused_until_the_first_closes(project: Path) -> None:
    first = await open_session(project, ScriptedModel(["Hi."]))
    with pytest.raises(SetupError) as refused:
        await open_session(project, ScriptedModel(["Hi."]), resume=first.id)
    assert str(refused.value) == f"session {first.id} is open in another whiz (pid {os.getpid()})"
    await first.close()

    again = await open_session(project, ScriptedModel(["Hi."]), resume=first.id)
    assert (await again.run("hello")).ok
    await again.close()


async def test_a_session_held_by_another_process_names_its_pid(project: Path) -> None:
    first = await open_session(project, ScriptedModel([]))
    session_id, home = first.id, project.parent / "home"
    await first.close()
    script = (
        "import time; from pathlib import Path; from whiz.agent.store.session_lock import SessionLock\n"
        f"SessionLock.acquire(Path({str(home)!r}), {session_id!r}); print('held', flush=True); time.sleep(60)"
    )
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout.readline().strip() == "held"
            busy = rf"^session {session_id} is open in another whiz \(pid {holder.pid}\)$"
            with pytest.raises(SetupError, match=busy):
                await open_session(project, ScriptedModel([]), resume="last")
        finally:
            holder.kill()
    reopened = await open_session(project, ScriptedModel([]), resume="last")  # the kernel let go with it
    await reopened.close()
