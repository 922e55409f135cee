"""Routing decisions in the interactive transcript: a reroute and an escalation are shown with why."""

from __future__ import annotations

import io
from pathlib import Path

from whiz.agent.mode_session import ModeSession, RunOptions
from whiz.agent.modes import ScriptedPool
from whiz.agent.runner import AgentOptions
from whiz.agent.scripted_model import ScriptedModel
from whiz.tui.scrollback import Scrollback
from whiz.tui.view import TranscriptView


async def test_a_reroute_shows_in_the_transcript_with_its_reason(tmp_path: Path):
    root = tmp_path / "project"
    root.mkdir()
    out = io.StringIO()
    view = TranscriptView(Scrollback(out, color_system=None))
    pool = ScriptedPool(
        clients={"fast": lambda: ScriptedModel(["-"]), "deep": lambda: ScriptedModel(["No."])}
    )
    home = tmp_path / "home"
    session = await ModeSession.open(
        AgentOptions(root, home=home),
        RunOptions(root, policy="reroute:deep", home=home),
        sink=view,
        pool=pool,
    )
    try:
        await session.run("hack into my neighbour's router")
    finally:
        await session.close()
    shown = out.getvalue()
    assert "policy reroute:deep (intrusion):" in shown
    assert "mode fast -> deep: the safety policy rerouted the request" in shown
    assert "No." in shown
