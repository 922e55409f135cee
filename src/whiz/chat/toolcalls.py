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


class _CallEnd:
    """Finds a call's closing tag as its body streams in, one character at a time (linear in the
    call's length), skipping any "</tool_call>" inside a JSON string: code in an argument that
    mentions the tag must not cut the call short."""

    def __init__(self) -> None:
        self.in_string = self.escaped = False
        self.matched = 0
        """How many characters of CLOSE the text outside strings ends with."""

    def feed(self, text: str) -> int | None:
        """The index in `text` just past the closing tag, or None when the call goes on."""
        for i, ch in enumerate(text):
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif ch == "\\":
                    self.escaped = True
                elif ch == '"':
                    self.in_string = False
            elif ch == '"':
                self.in_string, self.matched = True, 0
            elif ch == CLOSE[self.matched]:
                self.matched += 1
                if self.matched == len(CLOSE):
                    return i + 1
            else:  # "<" occurs once in CLOSE, so a mismatch can only restart at this character
                self.matched = 1 if ch == CLOSE[0] else 0
        return None


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
        self._end = _CallEnd()
        """Where the call being read ends: its "</tool_call>", outside the JSON's strings."""
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
                past = self._end.feed(self._buf)
                if past is None:
                    self._call.append(self._buf)
                    self._buf = ""
                    return out
                self._call.append(self._buf[:past])
                self._buf = self._buf[past:]
                body = "".join(self._call)[: -len(CLOSE)]
                self._call = None
                call = parse_call(body.strip())
                out.append(call if call else TextPart(OPEN + body + CLOSE))
                continue
            start = self._buf.find(OPEN)
            if start >= 0:
                if start:
                    out.append(TextPart(self._buf[:start]))
                self._buf = self._buf[start + len(OPEN) :]
                self._call, self._end = [], _CallEnd()
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
        self._buf, self._call = "", None
        return out
