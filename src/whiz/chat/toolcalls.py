"""Splitting the model's streamed text into plain text and `<tool_call>` blocks.

Qwen writes a call as `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`. Text outside
the tags streams through as it comes; text that could be the start of a tag is held until it is
known. A block whose JSON does not parse is passed on as plain text, so nothing is lost.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from whiz.chat.messages import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


@dataclass
class TextPart:
    text: str


def parse_call(body: str) -> ToolCall | None:
    """A ToolCall from the JSON between the tags, or None if it is not a call."""
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", {})
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ToolCall(id=new_call_id(), name=obj["name"], arguments=text)


class ToolCallParser:
    """Feed text deltas; get back TextPart and ToolCall pieces in order."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._buf = ""
        self._in_call = False

    def feed(self, text: str) -> list[TextPart | ToolCall]:
        if not self.enabled:
            return [TextPart(text)] if text else []
        self._buf += text
        out: list[TextPart | ToolCall] = []
        while True:
            if self._in_call:
                end = self._buf.find(CLOSE)
                if end < 0:
                    return out
                body, self._buf = self._buf[:end], self._buf[end + len(CLOSE) :]
                self._in_call = False
                call = parse_call(body.strip())
                out.append(call if call else TextPart(OPEN + body + CLOSE))
                continue
            start = self._buf.find(OPEN)
            if start >= 0:
                if start:
                    out.append(TextPart(self._buf[:start]))
                self._buf = self._buf[start + len(OPEN) :]
                self._in_call = True
                continue
            # Hold back a possible partial "<tool_call>" at the end.
            hold = next(
                (n for n in range(min(len(OPEN) - 1, len(self._buf)), 0, -1) if self._buf.endswith(OPEN[:n])),
                0,
            )
            if len(self._buf) > hold:
                out.append(TextPart(self._buf[: len(self._buf) - hold]))
                self._buf = self._buf[len(self._buf) - hold :]
            return out

    def finish(self) -> list[TextPart | ToolCall]:
        """Flush at the end of generation. An unclosed call is parsed if its JSON is whole."""
        out: list[TextPart | ToolCall] = []
        if self._in_call:
            call = parse_call(self._buf.strip())
            out.append(call if call else TextPart(OPEN + self._buf))
        elif self._buf:
            out.append(TextPart(self._buf))
        self._buf, self._in_call = "", False
        return out
