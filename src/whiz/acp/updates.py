"""The agent's events (`agent/events.py`) as ACP `session/update`s.

    agent_message       agent_message_chunk, streamed as the text grows
    tool_call           tool_call (read, list, search) then tool_call_update with its output
    command_execution   tool_call of kind execute, then its output and exit status
    file_change         tool_call of kind edit with a diff per file (old and new text)
    turn.failed         agent_message_chunk saying why (not for a cancellation: the stop reason says)
    routing, healing    agent_thought_chunk with the line `whiz exec` prints (`modes/notices.py`)

Everything else (turn starts, usage) is left out. The agent has no plan of its own to report.
"""

from __future__ import annotations

from typing import Any

from acp import (
    start_tool_call,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
)
from acp.schema import TextContentBlock, ToolCallLocation

from whiz.acp.diffs import DiffMismatch, other_side
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace
from whiz.modes.notices import describe

Update = Any
"""One of the SDK's session update models."""

TOOL_KINDS = {"read_file": "read", "list_files": "search", "search_text": "search"}
STATUSES = {"in_progress": "in_progress", "completed": "completed"}
"""Whiz item statuses ACP knows; the others (failed, declined) are `failed`."""
OUTPUT_CHARS = 4000
"""Tool output shown in the editor (the model may see more)."""


def _status(status: str | None) -> str:
    return STATUSES.get(status or "", "failed")


def _text(text: str) -> list:
    return [tool_content(TextContentBlock(type="text", text=text[:OUTPUT_CHARS]))]


class UpdateMapper:
    """Turns one session's events into updates. It remembers how much of each message it sent, so
    a message is streamed once, whether its events carry deltas or the whole text."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self.cancelled = False
        """Set when the client cancelled the turn: its end is the stop reason, not a message."""
        self._sent: dict[str, int] = {}

    def __call__(self, event: dict[str, Any]) -> list[Update]:
        kind = event.get("type")
        item = event.get("item") or {}
        if kind == "turn.started":
            self._sent.clear()
            return []
        if kind == "turn.failed":
            message = (event.get("error") or {}).get("message", "")
            if self.cancelled:
                return []
            return [update_agent_message_text(f"\n\nThe turn failed: {message}\n")] if message else []
        if kind not in ("item.started", "item.updated", "item.completed"):
            return []
        match item.get("type"):
            case "agent_message":
                return self._message(item)
            case "tool_call":
                return self._tool(kind, item)
            case "command_execution":
                return self._command(kind, item)
            case "file_change" if kind == "item.completed":
                return [self._file_change(item)]
        if kind == "item.completed" and (line := describe(item, show_candidates=False)):
            return [update_agent_thought_text(line + "\n")]
        return []

    def _message(self, item: dict[str, Any]) -> list[Update]:
        text = item.get("text") or ""
        sent = self._sent.get(item["id"], 0)
        self._sent[item["id"]] = len(text)
        return [update_agent_message_text(text[sent:])] if len(text) > sent else []

    def _tool(self, kind: str, item: dict[str, Any]) -> list[Update]:
        args = {k: v for k, v in (item.get("arguments") or {}).items() if v is not None}
        if kind == "item.started":
            path = args.get("path")
            words = " ".join(str(v) for v in args.values())
            locations = [ToolCallLocation(path=str(self.ws.root / path))] if path else None
            return [
                start_tool_call(
                    item["id"],
                    f"{item['tool']} {words}".strip(),
                    kind=TOOL_KINDS.get(item.get("tool", ""), "other"),
                    status="in_progress",
                    locations=locations,
                    raw_input=args,
                )
            ]
        if kind == "item.completed":
            output = item.get("output") or ""
            return [update_tool_call(item["id"], status=_status(item.get("status")), content=_text(output))]
        return []

    def _command(self, kind: str, item: dict[str, Any]) -> list[Update]:
        if kind == "item.updated":
            return []
        status = _status(item.get("status"))
        if kind == "item.started" or item.get("status") == "declined":
            start = start_tool_call(
                item["id"],
                f"$ {item['command']}",
                kind="execute",
                status="in_progress" if kind == "item.started" else status,
                raw_input={"command": item["command"]},
            )
            if kind == "item.started":
                return [start]
            return [start, update_tool_call(item["id"], status=status, content=_text("declined: not run"))]
        output = item.get("aggregated_output") or ""
        exit_code = item.get("exit_code")
        shown = f"{output}\n(exit {exit_code})" if exit_code is not None else output
        return [update_tool_call(item["id"], status=status, content=_text(shown))]

    def _file_change(self, item: dict[str, Any]) -> Update:
        paths = [c["path"] for c in item.get("changes", [])]
        status = _status(item.get("status"))
        content = self.diffs(item)
        return start_tool_call(
            item["id"],
            f"edit {', '.join(paths)}",
            kind="edit",
            status=status,
            content=content,
            locations=[ToolCallLocation(path=str(self.ws.root / p)) for p in paths],
            raw_input={"changes": item.get("changes", [])},
        )

    def diffs(self, item: dict[str, Any]) -> list:
        """ACP diff content for each file of a `file_change`: the file holds the new text once
        applied (the old one otherwise); the other side comes from the item's diff. A file whose
        side cannot be worked out is shown as the unified diff, in text."""
        applied = item.get("status") == "completed"
        content = []
        for change, diff in zip(item.get("changes", []), split_diff(item.get("diff", "")), strict=False):
            path, kind = change["path"], change.get("kind")
            try:
                now = self._read(path, absent=(kind == "delete") if applied else (kind == "add"))
                other = other_side(now, diff, reverse=applied)
            except (DiffMismatch, WhizAgentError, OSError):
                content += _text(diff)
                continue
            old, new = (other, now) if applied else (now, other)
            content.append(tool_diff_content(str(self.ws.root / path), new, None if kind == "add" else old))
        return content

    def _read(self, path: str, *, absent: bool) -> str:
        if absent:
            return ""
        return self.ws.read_text(path)


def split_diff(diff: str) -> list[str]:
    """A multi-file unified diff, one string per file (each starting at its `--- ` line)."""
    lines = diff.splitlines(keepends=True)
    parts: list[str] = []
    for i, line in enumerate(lines):
        header = line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")
        if header or not parts:
            parts.append("")
        parts[-1] += line
    return parts
