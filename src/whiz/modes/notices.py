"""Events of modes, healing, swarms and the safety policy, and their plain-text view.

These are items in the same stream as the agent's (`events.py`), so `--json` shows them and a UI
renders them like any other item:

    mode_change      {from, to, reason, trigger}   trigger: edit_failures, healing, policy,
                                                   swarm_retry, new_turn or user
    policy_decision  {action, category, reason, rules, checked_by}   only when routing changes
    heal             {round, mode, n, method, decode_ms, candidates_ms, passed, cancelled, best,
                      status}   decode_ms: every model call of the round, localizing included;
                      candidates_ms: the candidates' own decoding
    heal_candidate   {round, index, status, diff_lines, output_tokens, exit_code, test_output,
                      error, diff, same_as, failure, tests_passed, checks_failed, reply}   reply:
                      its text, when it has no edit; failure: what its failing tests said, trimmed;
                      checks_failed: its tests passed, the checks found in the code beside them not
    localize         {places: [{path, function, lines, hypothesis, origin}], sure, reply, ms}
                     ms: how long the model took to answer (0: nothing was asked)
    trace            {path, function, call, lines, ended, ms}   the failing call run once more,
                     traced line by line for the later rewrites (`trace.py`); lines: how many it ran
    swarm_plan       {tasks: [{id, title, files, check}]}
    micro_task       {task_id, title, files, status, attempt, mode, message, check_output}
    merge            {task_id, status, paths, conflicts: [{path, reason}], diff}
    found_checks     {use, reason, ran, label, checks: [{kind, where, text, before, after}]}   the
                     checks found in the user's code, what they are used for (none, not_run,
                     unusable, choose, guard, passing; beside: with a test command), each one's
                     verdict before and after the turn (started before the turn, completed after it)
    project_instructions  {files: [{path, tokens, shown_tokens, cut}], budget_tokens, cut, warnings}
                     the AGENTS.md files the model reads, once as a session opens

The agent's own `context_compacted` and `tool_stall` items get their lines here too, so every view
(`whiz exec`, the terminal UI, editors over ACP) says them the same way.

Their ids start with `item_w` so they never collide with the agent's own `item_N` ids.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from whiz.agent.context import instructions
from whiz.agent.context.test_feedback import headline
from whiz.agent.events import Emitter, Event, EventSink


class ItemEmitter(Emitter):
    """An `Emitter` whose item ids carry a prefix of their own."""

    def __init__(self, sink: EventSink, prefix: str = "item_w"):
        super().__init__(sink)
        self.prefix = prefix

    def start(self, type_: str, **fields: Any) -> dict[str, Any]:
        item = {"id": self._id(), "type": type_, **fields}
        self.emit("item.started", item=dict(item))
        return item

    def single(self, type_: str, **fields: Any) -> dict[str, Any]:
        item = {"id": self._id(), "type": type_, **fields}
        self.emit("item.completed", item=dict(item))
        return item

    def _id(self) -> str:
        self._next_item += 1
        return f"{self.prefix}{self._next_item - 1}"


class Tee:
    """An `EventSink` that hands every event to several sinks, in order."""

    def __init__(self, *sinks: EventSink):
        self.sinks = list(sinks)

    def __call__(self, event: Event) -> None:
        for sink in self.sinks:
            sink(event)


class NoticePrinter:
    """The plain-text lines for this module's items (stderr), beside the agent's own printer."""

    def __init__(self, err: TextIO | None = None, *, show_candidates: bool = True):
        self.err = err or sys.stderr
        self.show_candidates = show_candidates

    def __call__(self, event: Event) -> None:
        if event["type"] != "item.completed":
            return
        line = describe(event["item"], show_candidates=self.show_candidates)
        if line:
            self.err.write(f"whiz: {line}\n")
            self.err.flush()


def describe(item: dict[str, Any], *, show_candidates: bool = True) -> str | None:
    """One line for a person, or None for items this module does not own."""
    match item.get("type"):
        case "mode_change":
            return f"mode {item['from']} -> {item['to']}: {item['reason']}"
        case "policy_decision":
            return f"policy {item['action']} ({item['category']}): {item['reason']}"
        case "heal":
            best = "none passed" if item.get("best") is None else f"candidate {item['best']} passes"
            stopped = f", {item['cancelled']} cancelled once one passed" if item.get("cancelled") else ""
            return (
                f"heal round {item['round']} ({item['mode']}): {item['n']} candidates decoded "
                f"({item.get('method')}) in {item.get('decode_ms', 0) / 1000:.1f} s; {best}{stopped}"
            )
        case "heal_candidate" if show_candidates:
            extra = f", {item['diff_lines']} lines changed" if item.get("diff_lines") else ""
            why = f": {item['error']}" if item.get("error") else ""
            same = f" (same edit as candidate {item['same_as']})" if item.get("same_as") is not None else ""
            said = headline(item.get("failure") or "")
            told = f"\n      {said}" if said and item["status"] == "failed" else ""
            return f"  candidate {item['index']}: {item['status']}{extra}{same}{why}{told}"
        case "localize":
            if not item["places"]:
                return "localize: no function found; plain candidates"
            where = "; ".join(
                f"{p['path']}:{p['function']} (lines {p['lines'][0]}-{p['lines'][1]})"
                + (f": {p['hypothesis']}" if p.get("hypothesis") else "")
                for p in item["places"]
            )
            return f"localize: {where}"
        case "trace":
            lines = item.get("lines") or 0
            ran = f" ({lines} line{'s' if lines != 1 else ''} run)" if lines else ""
            return f"trace: {item['call']} {item['ended']}{ran}"
        case "found_checks":
            return _found_checks(item)
        case "project_instructions":
            return instructions.describe(item)
        case "context_compacted":
            return (
                f"context compacted ({item['summary']}): about {item['before_tokens']} -> "
                f"{item['after_tokens']} tokens of a {item['window_tokens']}-token window"
            )
        case "tool_stall":
            return f"tool calls stopped: {item['reason']}"
        case "swarm_plan":
            return f"plan: {len(item['tasks'])} micro-tasks"
        case "micro_task":
            return f"[{item['task_id']}] {item['status']} (attempt {item['attempt']}, {item['mode']})"
        case "merge":
            if item["status"] == "conflict":
                where = "; ".join(f"{c['path']}: {c['reason']}" for c in item.get("conflicts", []))
                return f"[{item['task_id']}] NOT merged, conflict: {where}"
            return f"[{item['task_id']}] {item['status']}: {', '.join(item.get('paths', [])) or 'no changes'}"
    return None


def _found_checks(item: dict[str, Any]) -> str | None:
    """Which checks found in the code ran and how they came out; nothing where none was found."""
    checks = item.get("checks") or []
    if not checks:
        return None
    if not item.get("ran"):
        return f"checks found in the code ({item.get('label')}) not run: {item.get('reason')}"
    after = [c for c in checks if c.get("after")]
    if not after:
        return f"checks found in the code ({item.get('label')}): {item.get('reason')}"
    passed = sum(c["after"] == "pass" for c in after)
    before = sum(c.get("before") == "pass" for c in after)
    return (
        f"checks found in the code ({item.get('label')}): {passed} of {len(after)} pass after the turn, "
        f"{before} before ({item.get('reason')})"
    )
