"""Driving a running agent: steering at the next step boundary, cancel at once, undo a turn."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from tests.agent.conftest import GREET, sr
from tests.web.test_workspace_heal import sleeping
from whiz.agent.models.scripted_model import Reply


async def wait_until(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)


async def test_a_steering_message_arrives_at_the_next_step(harness) -> None:
    slow = Reply("LIST .", delay_s=0.05, chunk_chars=1)
    h = harness([slow, "Use snake_case, noted.", "all done"])
    run = asyncio.ensure_future(h.agent.run("look around"))
    await wait_until(lambda: len(h.model.requests) == 1)
    h.agent.steer("also: use snake_case")
    result = await run
    assert result.ok
    first, second = h.model.requests[0], h.model.requests[1]
    assert not any("snake_case" in str(i.get("content")) for i in first.items)
    # After the first reply and its observation, before the second call.
    assert second.items[-1] == {"type": "message", "role": "user", "content": "also: use snake_case"}
    assert h.events.items("user_message")[0]["text"] == "also: use snake_case"


async def test_steering_during_a_final_answer_keeps_the_turn_going(harness) -> None:
    slow = Reply("I think it is fine.", delay_s=0.05, chunk_chars=1)
    h = harness([slow, "Renamed as asked."])
    run = asyncio.ensure_future(h.agent.run("check greet.py"))
    await wait_until(lambda: len(h.model.requests) == 1)
    h.agent.steer("rename it anyway")
    result = await run
    assert result.message == "Renamed as asked."
    assert len(h.model.requests) == 2


async def test_cancel_stops_the_model_at_once(harness, project: Path) -> None:
    slow = Reply(sr("greet.py", "def say_hello(name):", "def greet(name):"), delay_s=0.05, chunk_chars=1)
    h = harness([slow])
    run = asyncio.ensure_future(h.agent.run("rename"))
    await wait_until(lambda: len(h.model.requests) == 1)
    await wait_until(lambda: len(h.events.types()) > 3)  # a few characters of the reply are in
    streamed = h.events.types().count("item.updated")
    h.agent.cancel()
    result = await run
    assert result.status == "cancelled"
    assert h.model.cancels == 1  # the server was told to stop
    # ... and it did: no more than the piece under way when it was told (not the rest, or what
    # it would stream before the grace cut it off).
    assert h.events.types().count("item.updated") <= streamed + 1
    assert (project / "greet.py").read_text() == GREET
    assert h.events.types()[-1] == "turn.failed"
    # The partial reply stays in the conversation, as it does on the server.
    assert h.agent.items[-1]["role"] == "assistant"


async def test_cancel_kills_a_running_command(harness, project: Path) -> None:
    marker = f"3600.{os.getpid()}"  # an hour: the test ends only if the cancel kills it
    h = harness([f"RUN sleep {marker}"], approval="full-auto")
    run = asyncio.ensure_future(h.agent.run("sleep"))
    await wait_until(lambda: sleeping(marker))
    h.agent.cancel()
    result = await asyncio.wait_for(run, 60)  # only so a cancel that waits for the command fails
    assert result.status == "cancelled", (result, h.events.events)
    assert not sleeping(marker)
    [command] = h.events.items("command_execution")
    assert command["status"] == "failed"


async def test_a_cancelled_agent_can_take_the_next_task(harness, project: Path) -> None:
    h = harness([Reply("x" * 200, delay_s=0.02), sr("greet.py", "def say_hello(name):", "def greet(name):")])
    run = asyncio.ensure_future(h.agent.run("slow"))
    await wait_until(lambda: len(h.model.requests) == 1)
    h.agent.cancel()
    assert (await run).status == "cancelled"
    assert (await h.agent.run("rename say_hello to greet")).ok


async def test_undo_restores_the_whole_turn(harness, project: Path) -> None:
    replies = [
        sr("greet.py", "def say_hello(name):", "def greet(name):") + sr("new.py", "", "print('new')"),
    ]
    h = harness(replies)
    assert (await h.agent.run("rename and add new.py")).ok
    assert (project / "new.py").exists()
    restored = h.undo.undo(h.agent.ws).restored
    assert sorted(restored) == ["greet.py", "new.py"]
    assert (project / "greet.py").read_text() == GREET
    assert not (project / "new.py").exists()


async def test_undo_covers_every_step_of_a_turn(harness, project: Path) -> None:
    first = sr("greet.py", "def say_hello(name):", "def greet(name):")
    second = sr("greet.py", 'print(say_hello("world"))', 'print(greet("world"))')
    h = harness([first + "\nREAD greet.py", second])
    assert (await h.agent.run("rename everywhere")).ok
    assert 'print(greet("world"))' in (project / "greet.py").read_text()
    h.undo.undo(h.agent.ws)
    assert (project / "greet.py").read_text() == GREET
