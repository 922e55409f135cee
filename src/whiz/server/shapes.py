"""The Responses API's objects as whiz sends them, each shaped by one plain function.

The `response` object is built here and only here: HTTP, every streamed event that carries the
response (`response.created`, `.in_progress`, `.completed`, ...) and the WebSocket mode all send
what `response_resource` made, so a field the Open Responses specification requires cannot be
present on one transport and missing on another. Fields whiz has no use for carry the value that
describes what it did (no penalties, no log probabilities, no background run, no reasoning).
"""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from typing import Any

SERVICE_TIER = "default"
"""whiz has one tier: every request runs the same way."""


def echo_tools(tools: list[dict] | None, *, strict: bool) -> list[dict]:
    """The request's tools as a response lists them. A function tool gets every field the
    specification requires (`description` and `parameters` may be null); `strict` is what the
    request said, else whether whiz constrains the calls to the schema (`strict`). Other kinds
    (custom, namespace, hosted) are echoed as sent."""
    out = []
    for tool in tools or []:
        if isinstance(tool, dict) and tool.get("type") == "function":
            given = tool.get("strict")
            tool = {
                **tool,
                "description": tool.get("description"),
                "parameters": tool.get("parameters"),
                "strict": given if isinstance(given, bool) else strict,
            }
        out.append(tool)
    return out


def response_resource(
    *,
    id: str,
    created_at: int,
    model: str,
    request: Any,
    temperature: float,
    top_p: float,
    strict_tools: bool,
) -> dict:
    """A response in progress, with no output yet: every field of the specification's
    `ResponseResource`, in its order. `request` is the validated `ResponsesRequest`."""
    return {
        "id": id,
        "object": "response",
        "created_at": created_at,
        "completed_at": None,
        "status": "in_progress",
        "incomplete_details": None,
        "model": model,
        "previous_response_id": request.previous_response_id,
        "instructions": request.instructions,
        "output": [],
        "error": None,
        "tools": echo_tools(request.tools, strict=strict_tools),
        "tool_choice": request.tool_choice or "auto",
        "truncation": request.truncation or "disabled",
        "parallel_tool_calls": request.parallel_tool_calls,
        "text": {"format": {"type": "text"}},
        "top_p": top_p,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "top_logprobs": 0,
        "temperature": temperature,
        "reasoning": {"effort": None, "summary": None},
        "usage": None,
        "max_output_tokens": request.max_output_tokens,
        "max_tool_calls": request.max_tool_calls,
        "store": request.store,
        "background": False,
        "service_tier": SERVICE_TIER,
        "metadata": request.metadata or {},
        "safety_identifier": request.safety_identifier,
        "prompt_cache_key": request.prompt_cache_key,
    }


def ended(response: dict, status: str, **fields: Any) -> dict:
    """`response` as it ends with `status`: a completed one gets its `completed_at`."""
    response.update(status=status, **fields)
    if status == "completed":
        response["completed_at"] = int(time.time())
    return response


# -- Compaction ------------------------------------------------------------------------------------

COMPACTION_PREFIX = "whiz-compaction-v1:"
"""How a compaction item whiz made begins. Its `encrypted_content` is not encrypted: it is the
summary, base64-encoded, so a client passes it back as the opaque value the specification
describes, and whiz alone reads it (a local server has no secret to hide it from its own user)."""


def compaction_item(summary: str) -> dict:
    """The item that stands for the compacted part of a conversation."""
    content = COMPACTION_PREFIX + base64.b64encode(summary.encode("utf-8")).decode("ascii")
    return {"type": "compaction", "id": new_item_id("cmp"), "encrypted_content": content}


def compaction_summary(content: Any) -> str | None:
    """The summary a compaction item holds, or None when whiz did not make it."""
    if not isinstance(content, str) or not content.startswith(COMPACTION_PREFIX):
        return None
    try:
        return base64.b64decode(content[len(COMPACTION_PREFIX) :], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def message_item(role: str, text: str) -> dict:
    """An input message as an item of a compacted window (kept verbatim)."""
    part = "output_text" if role == "assistant" else "input_text"
    content: dict[str, Any] = {"type": part, "text": text}
    if part == "output_text":
        content["annotations"] = []
    return {
        "type": "message",
        "id": new_item_id("msg"),
        "status": "completed",
        "role": role,
        "content": [content],
    }


def compact_resource(*, output: list[dict], usage: dict) -> dict:
    """The answer of `POST /v1/responses/compact`: the window to start the next response from."""
    return {
        "id": new_item_id("cmp"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": output,
        "usage": usage,
    }


def new_item_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"
