"""Splitting the model's streamed text into plain text and `<tool_call>` blocks.

Qwen writes a call as `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`. Text outside
the tags streams through as it comes; text that could be the start of a tag is held until it is
known. A block whose JSON does not parse is passed on as plain text, so nothing is lost.

Small models often write the call in other shapes: the JSON alone, or in a ```json fence. Where
the tools' names are known, a reply that starts that way is held to its end and read as a call
when it is one (an object, or a list of objects, naming a tool and its arguments); else it is
passed on as the text it was. A reply that starts with a fence of code goes through as it comes.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection
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


def parse_bare_calls(text: str, names: Collection[str]) -> list[ToolCall] | None:
    """The calls in a reply that is only JSON, fenced or not: an object (or a list of objects) with a
    known tool's `name` and its `arguments` (`parameters` and `input` are read too). None otherwise."""
    body = text.strip()
    fenced = re.fullmatch(r"```[A-Za-z0-9_-]*\s*\n(.*?)\n?```", body, re.S)
    if fenced:
        body = fenced.group(1).strip()
    try:
        found = json.loads(body)
    except json.JSONDecodeError:
        return None
    calls = []
    for obj in found if isinstance(found, list) else [found]:
        if not isinstance(obj, dict) or obj.get("name") not in names:
            return None
        args = next((obj[k] for k in ("arguments", "parameters", "input") if k in obj), {})
        text_args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        calls.append(ToolCall(id=new_call_id(), name=obj["name"], arguments=text_args))
    return calls or None


def _string_state(text: str, inside: bool, escaped: bool) -> tuple[bool, bool]:
    """Whether JSON text that began in state (`inside` a string, after an `escaped` backslash) ends
    inside a string, and after a backslash: followed a delta at a time, so a long call is scanned once."""
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and inside:
            escaped = True
        elif ch == '"':
            inside = not inside
    return inside, escaped


class ToolCallParser:
    """Feed text deltas; get back TextPart and ToolCall pieces in order.

    `names`: the tools the request offers; with them, a reply in JSON alone is read as calls too."""

    def __init__(self, enabled: bool = True, names: Collection[str] = ()):
        self.enabled = enabled
        self.names = frozenset(names)
        # This runs on the event loop for every token, and one call can be a whole file: text is
        # kept in pieces and only new text is searched, so a call costs time linear in its length.
        self._buf = ""
        """Text not yet passed on: outside a call, at most a partial "<tool_call>" and the new text."""
        self._call: list[str] | None = None
        """The body of the call being read, in pieces; None outside a call."""
        self._tail = ""
        """The call's last characters, where a "</tool_call>" split across deltas begins."""
        self._tail_state = (False, False)
        """Whether the call is inside a JSON string, and after a backslash, where `_tail` begins."""
        self._held: list[str] = []
        """A reply held to its end because it began as JSON."""
        self._start: str | None = None if self.names else "tags"
        """How the reply began: None until known, "tags" (stream, watching for tags), "json" (held)."""

    def feed(self, text: str) -> list[TextPart | ToolCall]:
        if not self.enabled:
            return [TextPart(text)] if text else []
        if self._start == "json":
            self._held.append(text)
            return []  # held to the end: a call in another shape, or text after all
        self._buf += text
        if self._start is None:
            self._start = self._opening(self._buf)
            if self._start is None:
                return []  # not yet known how the reply starts
            if self._start == "json":
                self._held, self._buf = [self._buf], ""
                return []
        return self._tags()

    def _opening(self, text: str) -> str | None:
        head = text.lstrip()
        if not head:
            return None
        if head.startswith("{") or head.startswith("["):
            return "json"
        if head.startswith("```"):
            if "\n" not in head:
                return None if len(head) < 40 else "tags"
            first, rest = head.split("\n", 1)
            if first.strip("`").strip().lower() in ("", "json"):
                if not rest.lstrip():
                    return None
                return "json" if rest.lstrip()[0] in "{[" else "tags"
        return "tags"

    def _tags(self) -> list[TextPart | ToolCall]:
        out: list[TextPart | ToolCall] = []
        while True:
            if self._call is not None:
                window = self._tail + self._buf  # the body read so far ends with this window
                end, state, scanned = window.find(CLOSE), self._tail_state, 0
                while end >= 0:
                    state, scanned = _string_state(window[scanned:end], *state), end
                    if not state[0]:
                        break
                    # "</tool_call>" inside an argument (code that mentions the tag): not the end.
                    end = window.find(CLOSE, end + 1)
                self._call.append(self._buf)
                self._buf = ""
                if end < 0:
                    self._tail = window[-(len(CLOSE) - 1) :]
                    self._tail_state = _string_state(window[scanned : len(window) - len(self._tail)], *state)
                    return out
                body = "".join(self._call)
                close_at = len(body) - len(window) + end
                body, self._buf = body[:close_at], body[close_at + len(CLOSE) :]
                self._call, self._tail, self._tail_state = None, "", (False, False)
                call = parse_call(body.strip())
                out.append(call if call else TextPart(OPEN + body + CLOSE))
                continue
            start = self._buf.find(OPEN)
            if start >= 0:
                if start:
                    out.append(TextPart(self._buf[:start]))
                self._buf = self._buf[start + len(OPEN) :]
                self._call, self._tail, self._tail_state = [], "", (False, False)
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
        if self._start != "tags":
            self._buf = "".join(self._held) + self._buf
            self._held = []
            if self._buf.strip():
                calls = parse_bare_calls(self._buf, self.names)
                if calls:
                    self._buf = ""
                    return list(calls)
                self._start = "tags"
                out = self._tags()
        if self._call is not None:
            body = "".join(self._call) + self._buf
            call = parse_call(body.strip())
            out.append(call if call else TextPart(OPEN + body))
        elif self._buf:
            out.append(TextPart(self._buf))
        self._buf, self._call, self._tail, self._tail_state = "", None, "", (False, False)
        return out
