"""Routing decisions in the transcript: which model answers and why, in a line that stands out.

A switch of model (`mode_change`) and a flagged request (`policy_decision`) each get a mark and a
colour of their own, so an escalation or a reroute is never mistaken for the model's text:

    ▲ escalated fast → deep: the fast model's edit failed to apply 2 times (...)
    ⚑ safety policy rerouted the request to the deep model (intrusion): ...
    ⇄ fast → deep: you chose /mode deep

Healing and swarm progress keep the one-line wording of `whiz exec` (`agent.notices.describe`).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from whiz.modes.notices import describe

ESCALATIONS = ("edit_failures", "healing", "swarm_retry")
POLICY_ACTIONS = {
    "refuse": ("refused the request", "bold red"),
    "reroute:deep": ("rerouted the request to the deep model", "bold magenta"),
    "allow": ("let the request through", "yellow"),
}


def render_notice(item: dict[str, Any]) -> Text | None:
    """The transcript line for a mode change, a policy decision, healing or swarm progress; None
    for items that are not notices."""
    match item.get("type"):
        case "mode_change":
            return _mode_change(item)
        case "policy_decision":
            action = item.get("action", "")
            said, style = POLICY_ACTIONS.get(action, (f"decided {action}", "bold"))
            return Text.assemble(
                (f"⚑ safety policy {said} ({item.get('category', '?')})", style),
                f": {item.get('reason', '')}",
            )
        case "context_compacted":
            return Text(f"⤓ {describe(item)}", style="bold blue")
    line = describe(item)
    return Text(line, style="cyan") if line else None


def _mode_change(item: dict[str, Any]) -> Text:
    route = f"{item.get('from')} → {item.get('to')}"
    reason = item.get("reason", "")
    trigger = item.get("trigger")
    if trigger in ESCALATIONS:
        head, style = f"▲ escalated {route}", "bold yellow"
    elif trigger == "policy":
        head, style = f"▲ rerouted {route}", "bold magenta"
    elif trigger == "new_turn":
        return Text(f"⇄ {route}: {reason}", style="dim cyan")
    else:  # the user's /mode
        head, style = f"⇄ {route}", "bold cyan"
    return Text.assemble((head, style), f": {reason}")
