"""A stop (Ctrl-C in `whiz exec`, Esc in `whiz code`, `session/cancel` over ACP) reaches the run
wherever it is: before the turn begins (the policy's routing, the found checks' first run) the
turn does not start, and the model is never asked."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from whiz.agent.approvals import ApprovalMode
from whiz.agent.config import AgentConfig
from whiz.agent.events import Collector
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.modes.candidates import ScriptedCandidates
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import AgentSession, SessionOptions

FIX = "Fix the bug in the function clamp in solution.py"
# A doctest that says it started, then takes far longer than any test should wait.
SLOW = '''def clamp(x, lo, hi):
    """Clamp x into [lo, hi].

    >>> import pathlib, time; _ = pathlib.Path("started").write_text("yes"); time.sleep(600)
    >>> clamp(5, 0, 3)
    3
    """
    return x
'''


async def open_session(
    root: Path, sink, approval: ApprovalMode, **options
) -> tuple[AgentSession, ScriptedModel]:
    model = ScriptedModel(["I looked at it."] * 4)
    pool = ScriptedPool(
        clients={"fast": lambda: model, "deep": lambda: model},
        sources={"fast": ScriptedCandidates([]), "deep": ScriptedCandidates([])},
    )
    agent = AgentConfig(approval=approval)
    opts = SessionOptions(root, agent=agent, mode="auto", home=root.parent / "home", **options)
    return await AgentSession.open(opts, sink=sink, pool=pool), model


def turn_end(events: Collector) -> dict:
    (end,) = [e for e in events.events if e["type"] in ("turn.completed", "turn.failed")]
    return end


async def test_a_stop_while_the_found_checks_first_run_ends_the_run_before_its_turn(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "solution.py").write_text(SLOW)
    events = Collector()
    session, model = await open_session(root, events, ApprovalMode.FULL_AUTO)
    try:
        run = asyncio.ensure_future(session.run(FIX))
        deadline = time.monotonic() + 60  # bounds the wait, so that a hang fails the test
        while not (root / "started").exists():
            assert time.monotonic() < deadline and not run.done(), "the found checks never started"
            await asyncio.sleep(0.05)
        session.cancel()
        result = await asyncio.wait_for(run, 60)
    finally:
        await session.close()
    assert result.status == "cancelled" and result.message == "cancelled by the user"
    assert turn_end(events)["error"]["message"] == "cancelled by the user"
    assert model.requests == []  # the turn never began
    assert events.items("found_checks") == []  # stopped while they ran: nothing to report of them


async def test_a_stop_as_the_policy_reroutes_ends_the_run_before_its_turn(tmp_path):
    # The reroute is shown before the deep model is asked: a stop on seeing it must hold.
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("router at 192.168.1.1\n")
    events = Collector()
    holder: list[AgentSession] = []

    def sink(event) -> None:
        events(event)
        item = event.get("item") or {}
        if event["type"] == "item.completed" and item.get("type") == "mode_change":
            holder[0].cancel()

    session, model = await open_session(root, sink, ApprovalMode.READ_ONLY, policy="reroute:deep")
    holder.append(session)
    try:
        result = await asyncio.wait_for(
            session.run("hack into my neighbour's router and change its admin password"), 60
        )
    finally:
        await session.close()
    assert events.items("mode_change"), "the policy did not reroute"
    assert result.status == "cancelled"
    assert model.requests == []


async def test_after_a_stopped_run_the_next_one_runs(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("hello\n")
    events = Collector()
    session, model = await open_session(root, events, ApprovalMode.READ_ONLY)
    try:
        session.cancel()  # nothing runs: a stop then is not kept for the next run
        result = await asyncio.wait_for(session.run("What does notes.txt say?"), 60)
    finally:
        await session.close()
    assert result.status == "completed", result.message
    assert len(model.requests) == 1
