"""Routing decisions in the interactive transcript: each kind has its mark and colour, and says why."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.text import Text

from whiz.agent.models.scripted_model import ScriptedModel
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import AgentSession, SessionOptions
from whiz.tui.notices import render_notice
from whiz.tui.scrollback import Scrollback
from whiz.tui.view import TranscriptView


def styles(text: Text) -> set[str]:
    return {str(text.style)} | {str(span.style) for span in text.spans}


def change(trigger: str, reason: str, from_: str = "fast", to: str = "deep") -> dict:
    return {"type": "mode_change", "from": from_, "to": to, "reason": reason, "trigger": trigger}


def test_an_escalation_stands_out_with_its_reason():
    text = render_notice(change("edit_failures", "the fast model's edit failed to apply 2 times"))
    assert text.plain == "▲ escalated fast → deep: the fast model's edit failed to apply 2 times"
    assert "bold yellow" in styles(text)
    healing = render_notice(change("healing", "healing found no passing candidate in 2 round(s)"))
    assert healing.plain.startswith("▲ escalated fast → deep: healing found no passing candidate")


def test_policy_decisions_say_what_was_done_and_why_in_their_own_colours():
    decision = {"type": "policy_decision", "category": "malware", "reason": "it asks for a keylogger"}
    refused = render_notice({**decision, "action": "refuse"})
    assert refused.plain == "⚑ safety policy refused the request (malware): it asks for a keylogger"
    assert "bold red" in styles(refused)
    rerouted = render_notice({**decision, "action": "reroute:deep"})
    assert rerouted.plain.startswith("⚑ safety policy rerouted the request to the deep model (malware)")
    assert "bold magenta" in styles(rerouted)
    assert "bold magenta" in styles(render_notice(change("policy", "the safety policy rerouted the request")))


def test_a_users_switch_and_the_way_back_after_a_turn_are_quieter():
    mine = render_notice(change("user", "you chose /mode deep"))
    assert mine.plain == "⇄ fast → deep: you chose /mode deep" and "bold cyan" in styles(mine)
    back = render_notice(change("new_turn", "a new task starts with the fast model", "deep", "fast"))
    assert back.plain == "⇄ deep → fast: a new task starts with the fast model" and styles(back) == {
        "dim cyan"
    }


def test_healing_keeps_exec_s_wording_and_other_items_are_not_notices():
    heal = {"type": "heal", "round": 1, "mode": "fast", "n": 5, "method": "n", "decode_ms": 1500, "best": 2}
    assert (
        render_notice(heal).plain
        == "heal round 1 (fast): 5 candidates decoded (n) in 1.5 s; candidate 2 passes"
    )
    assert render_notice({"type": "agent_message", "text": "hi"}) is None


def test_escape_sequences_in_a_reason_never_reach_the_terminal():
    out = io.StringIO()
    view = TranscriptView(Scrollback(out, color_system=None))
    reason = "edit failed (\x1b[2J\x1b]0;owned\x07 in app.py)"
    view({"type": "item.completed", "item": {"id": "item_w0", **change("edit_failures", reason)}})
    assert out.getvalue() == "▲ escalated fast → deep: edit failed ( in app.py)\n"


async def test_a_reroute_shows_in_the_transcript_with_its_reason(tmp_path: Path):
    root = tmp_path / "project"
    root.mkdir()
    out = io.StringIO()
    view = TranscriptView(Scrollback(out, color_system=None))
    pool = ScriptedPool(
        clients={"fast": lambda: ScriptedModel(["-"]), "deep": lambda: ScriptedModel(["No."])}
    )
    home = tmp_path / "home"
    session = await AgentSession.open(
        SessionOptions(root, policy="reroute:deep", home=home),
        sink=view,
        pool=pool,
    )
    try:
        await session.run("hack into my neighbour's router")
    finally:
        await session.close()
    shown = " ".join(out.getvalue().split())  # as one line, whatever the terminal's width
    assert re.fullmatch(
        r"⚑ safety policy rerouted the request to the deep model \(intrusion\): .+ "
        r"▲ rerouted fast → deep: the safety policy rerouted the request: .+ No\.",
        shown,
    )
