"""The agent's events: what `whiz exec --json` prints, one JSON object a line, and what a UI reads.

The shapes follow the Codex CLI's `codex exec --json`, so tools that read one can read the other:

    thread.started   {thread_id}
    turn.started     {turn_id}
    item.started / item.updated / item.completed   {item: {id, type, ...}}
    turn.completed   {usage: {input_tokens, cached_input_tokens, output_tokens}, timings: {...}}
    turn.failed      {error: {message}}
    error            {message}

Item types: `agent_message` {text}, `file_change` {changes: [{path, kind}], status, diff},
`command_execution` {command, aggregated_output, exit_code, status}, and whiz's own
`tool_call` {tool, arguments, output, status} (read, list, search), `user_message` {text}
(a steering message delivered), `error` {message} (feedback on a malformed action) and
`context_compacted` {reason, before_tokens, after_tokens, window_tokens, shortened, summarised,
kept, summary} (the conversation was compacted to fit the context window: `compaction.py`) and
`tool_stall` {reason, tool, arguments, answered_from} (the turn's tool calls stopped making
progress, and the call named was not made: `stalls.py`; the turn's answer follows).
`item.updated` of an agent message also carries `delta`, the text just streamed.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

Event = dict[str, Any]
EventSink = Callable[[Event], None]


class Emitter:
    """Builds events with item ids unique in the thread and hands them to a sink."""

    def __init__(self, sink: EventSink):
        self.sink = sink
        self._next_item = 0

    def emit(self, type_: str, **fields: Any) -> Event:
        event = {"type": type_, **fields}
        self.sink(event)
        return event

    def start(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Start an item; returns it, to be updated and completed by the caller."""
        item = {"id": f"item_{self._next_item}", "type": type_, **fields}
        self._next_item += 1
        self.emit("item.started", item=dict(item))
        return item

    def update(self, item: dict[str, Any], **fields: Any) -> None:
        item.update(fields)
        self.emit("item.updated", item=dict(item))

    def complete(self, item: dict[str, Any], **fields: Any) -> None:
        item.update(fields)
        self.emit("item.completed", item=dict(item))

    def single(self, type_: str, **fields: Any) -> dict[str, Any]:
        """An item that is done as soon as it exists (a message delivered, feedback given)."""
        item = {"id": f"item_{self._next_item}", "type": type_, **fields}
        self._next_item += 1
        self.emit("item.completed", item=dict(item))
        return item


class JsonLinesPrinter:
    """An `EventSink` printing one JSON object a line; agent-message updates are coalesced.

    A small model streams ~30 tokens a second and every update carries the text so far, so
    updates of one item are printed at most every `update_interval_s`; started and completed
    events always are.
    """

    def __init__(self, out: TextIO | None = None, *, update_interval_s: float = 0.25):
        self.out = out or sys.stdout
        self.update_interval_s = update_interval_s
        self._last_update: dict[str, float] = {}

    def __call__(self, event: Event) -> None:
        if event["type"] == "item.updated":
            item_id = event["item"]["id"]
            now = time.monotonic()
            if now - self._last_update.get(item_id, 0.0) < self.update_interval_s:
                return
            self._last_update[item_id] = now
            event = {k: v for k, v in event.items() if k != "delta"}
        self.out.write(json.dumps(event, ensure_ascii=False) + "\n")
        self.out.flush()


class Collector:
    """An `EventSink` that keeps every event, for tests and for callers that look afterwards."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def items(self, type_: str) -> list[dict[str, Any]]:
        """Completed items of one type, in order."""
        return [
            e["item"] for e in self.events if e["type"] == "item.completed" and e["item"]["type"] == type_
        ]
