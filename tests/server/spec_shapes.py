"""What the Open Responses specification (its openapi.json, 2026-04-24) requires of the objects a
server sends, written out by hand: each required field and the JSON types it may take.

`problems(obj, kind)` lists what is missing or mistyped, so a test shows every gap at once.
"""

from __future__ import annotations

from typing import Any

NULL = type(None)
NUMBER = (int, float)

RESPONSE = {
    "id": str,
    "object": str,
    "created_at": int,
    "completed_at": (int, NULL),
    "status": str,
    "incomplete_details": (dict, NULL),
    "model": str,
    "previous_response_id": (str, NULL),
    "instructions": (str, NULL),
    "output": list,
    "error": (dict, NULL),
    "tools": list,
    "tool_choice": (str, dict),
    "truncation": str,
    "parallel_tool_calls": bool,
    "text": dict,
    "top_p": NUMBER,
    "presence_penalty": NUMBER,
    "frequency_penalty": NUMBER,
    "top_logprobs": int,
    "temperature": NUMBER,
    "reasoning": (dict, NULL),
    "usage": (dict, NULL),
    "max_output_tokens": (int, NULL),
    "max_tool_calls": (int, NULL),
    "store": bool,
    "background": bool,
    "service_tier": str,
    "metadata": dict,
    "safety_identifier": (str, NULL),
    "prompt_cache_key": (str, NULL),
}
USAGE = {
    "input_tokens": int,
    "output_tokens": int,
    "total_tokens": int,
    "input_tokens_details": dict,
    "output_tokens_details": dict,
}
FUNCTION_TOOL = {
    "type": str,
    "name": str,
    "description": (str, NULL),
    "parameters": (dict, NULL),
    "strict": (bool, NULL),
}
REASONING = {"effort": (str, NULL), "summary": (str, NULL)}
ERROR = {"code": str, "message": str}
MESSAGE = {"type": str, "id": str, "status": str, "role": str, "content": list}
FUNCTION_CALL = {"type": str, "id": str, "call_id": str, "name": str, "arguments": str, "status": str}
COMPACTION = {"type": str, "id": str, "encrypted_content": str}
OUTPUT_TEXT = {"type": str, "text": str, "annotations": list}
COMPACT_RESOURCE = {"id": str, "object": str, "output": list, "created_at": int, "usage": dict}
WS_ERROR = {"type": str, "status": int, "error": dict}

ITEMS = {"message": MESSAGE, "function_call": FUNCTION_CALL, "compaction": COMPACTION}

_PART = {"item_id": str, "output_index": int, "content_index": int, "part": dict}
EVENTS: dict[str, dict[str, Any]] = {
    **{
        f"response.{kind}": {"response": dict}
        for kind in ("created", "queued", "in_progress", "completed", "failed", "incomplete")
    },
    "response.output_item.added": {"output_index": int, "item": dict},
    "response.output_item.done": {"output_index": int, "item": dict},
    "response.content_part.added": _PART,
    "response.content_part.done": _PART,
    "response.output_text.delta": {"item_id": str, "output_index": int, "content_index": int, "delta": str},
    "response.output_text.done": {"item_id": str, "output_index": int, "content_index": int, "text": str},
    "response.function_call_arguments.delta": {"item_id": str, "output_index": int, "delta": str},
    "response.function_call_arguments.done": {"item_id": str, "output_index": int, "arguments": str},
    "error": {"error": dict},
}
"""Every streamed event also needs `type` and an integer `sequence_number`."""


def fields(obj: Any, required: dict[str, Any], where: str) -> list[str]:
    if not isinstance(obj, dict):
        return [f"{where}: not an object"]
    out = []
    for name, types in required.items():
        if name not in obj:
            out.append(f"{where}.{name}: missing")
        elif not isinstance(obj[name], types) or (types is int and isinstance(obj[name], bool)):
            out.append(f"{where}.{name}: {type(obj[name]).__name__} is not {types}")
    return out


def item_problems(item: Any, where: str) -> list[str]:
    kind = item.get("type") if isinstance(item, dict) else None
    out = fields(item, ITEMS[kind], where) if kind in ITEMS else []
    if kind == "message":
        for i, part in enumerate(item.get("content") or []):
            if part.get("type") == "output_text":
                out += fields(part, OUTPUT_TEXT, f"{where}.content.{i}")
    return out


def response_problems(resp: Any, where: str = "response") -> list[str]:
    out = fields(resp, RESPONSE, where)
    if out:
        return out
    if resp["object"] != "response":
        out.append(f"{where}.object: {resp['object']!r}")
    if resp["truncation"] not in ("auto", "disabled"):
        out.append(f"{where}.truncation: {resp['truncation']!r}")
    if resp["usage"] is not None:
        out += fields(resp["usage"], USAGE, f"{where}.usage")
    if resp["reasoning"] is not None:
        out += fields(resp["reasoning"], REASONING, f"{where}.reasoning")
    if resp["error"] is not None:
        out += fields(resp["error"], ERROR, f"{where}.error")
    out += fields(resp["text"], {"format": dict}, f"{where}.text")
    for i, tool in enumerate(resp["tools"]):
        if tool.get("type") == "function":
            out += fields(tool, FUNCTION_TOOL, f"{where}.tools.{i}")
    for i, item in enumerate(resp["output"]):
        out += item_problems(item, f"{where}.output.{i}")
    return out


def event_problems(ev: Any) -> list[str]:
    """What is wrong with one streamed event (HTTP or WebSocket)."""
    kind = ev.get("type") if isinstance(ev, dict) else None
    if kind not in EVENTS:
        return [f"event of unknown type {kind!r}"]
    where = kind
    out = fields(ev, {"type": str, "sequence_number": int, **EVENTS[kind]}, where)
    if "response" in EVENTS[kind] and isinstance(ev.get("response"), dict):
        out += response_problems(ev["response"], f"{where}.response")
    if isinstance(ev.get("item"), dict):
        out += item_problems(ev["item"], f"{where}.item")
    if isinstance(ev.get("part"), dict):
        out += fields(ev["part"], OUTPUT_TEXT, f"{where}.part")
    return out


def compact_problems(obj: Any) -> list[str]:
    out = fields(obj, COMPACT_RESOURCE, "compaction")
    if out:
        return out
    if obj["object"] != "response.compaction":
        out.append(f"compaction.object: {obj['object']!r}")
    out += fields(obj["usage"], USAGE, "compaction.usage")
    for i, item in enumerate(obj["output"]):
        out += item_problems(item, f"compaction.output.{i}")
    return out
