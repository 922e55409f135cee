"""POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API, for Claude Code and
other clients of it.

A request becomes the same backend turn a chat completion does, so it shares the engine's warm
sessions and prefix cache: a Claude Code conversation sends its whole history every turn, and the
engine finds all but the newest messages already in a slot. What has no local meaning is accepted
and left out: `cache_control` and `thinking` hints, `metadata`, and server-side tools
(`web_search_*`, `code_execution_*`, ...), which only Anthropic's servers run.

Errors are Anthropic's shape, `{"type": "error", "error": {"type", "message"}}`, on these routes.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from whiz.backend.types import TextDelta, TurnRequest, TurnResult
from whiz.chat.messages import Message, Tool, ToolCall
from whiz.engine.types import SamplingParams
from whiz.errors import InvalidRequest, WhizError
from whiz.server.http import ClientGone, run_to_end
from whiz.server.keepalive import with_keepalive
from whiz.server.protocol import (
    MAX_TOOLS,
    OFF_LOOP_CHARS,
    WhizOptions,
    bounded_stops,
    wants_tool_grammar,
)
from whiz.server.requests import read_request, session_header
from whiz.server.responses import timings

if TYPE_CHECKING:
    from whiz.server.state import ServerState

MESSAGES_PATH = "/v1/messages"
"""Where Anthropic's API lives; errors under it take Anthropic's shape."""
MAX_STOP_SEQUENCES = 8
"""Anthropic documents no number; a handful is what clients send (Claude Code sends none)."""

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}


class _Wire(BaseModel):
    # Unknown fields are hints this server has no use for (thinking, service_tier, container, ...).
    model_config = ConfigDict(extra="ignore")


class MessageParam(_Wire):
    # Claude Code also sends system messages among the others (reminders about its environment).
    role: Literal["user", "assistant", "system"]
    content: str | list[dict[str, Any]]


class MessagesRequest(_Wire):
    model: str = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    messages: list[MessageParam] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_choice: dict[str, Any] | None = None
    stop_sequences: list[str] | None = Field(default=None, max_length=MAX_STOP_SEQUENCES)

    _stops = field_validator("stop_sequences")(bounded_stops(MAX_STOP_SEQUENCES))

    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    stream: bool = False
    whiz: WhizOptions | None = None
    """whiz's own options, as on the OpenAI APIs (`tool_grammar` is the one read here)."""


class CountTokensRequest(_Wire):
    model: str = Field(min_length=1)
    messages: list[MessageParam] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = Field(default=None, max_length=MAX_TOOLS)


# -- the request, as a backend turn -------------------------------------------------------------------


BILLING_HEADER = "x-anthropic-billing-header:"
"""Claude Code's first system block: metadata for Anthropic's billing (its version and how it was
started: `cli`, `sdk-cli`), no instruction. Left out, so that its sessions however started share
one prompt prefix (and what `whiz setup claude` warmed)."""


def system_text(system: str | list[dict[str, Any]] | None) -> str | None:
    """`system` as one text: a string, or the texts of its blocks (their `cache_control` ignored;
    a billing header left out)."""
    if system is None or isinstance(system, str):
        return system or None
    texts = [_block_text(block, "system") for block in system]
    return "\n\n".join(t for t in texts if not t.startswith(BILLING_HEADER)) or None


def tool_list(tools: list[dict[str, Any]] | None, tool_choice: dict[str, Any] | None) -> list[Tool]:
    """The client's own tools; server tools (a `type` other than custom) only Anthropic runs."""
    if tool_choice is not None and tool_choice.get("type") == "none":
        return []
    found = []
    for i, tool in enumerate(tools or []):
        if not isinstance(tool, dict):
            raise InvalidRequest("Each tool must be an object.", param=f"tools.{i}")
        if tool.get("type", "custom") != "custom":
            continue
        name, schema = tool.get("name"), tool.get("input_schema")
        if not isinstance(name, str) or not name:
            raise InvalidRequest("A tool needs a name.", param=f"tools.{i}.name")
        if not isinstance(schema, dict):
            raise InvalidRequest("A tool needs an input_schema object.", param=f"tools.{i}.input_schema")
        found.append(Tool(name, str(tool.get("description") or ""), schema))
    return found


def _required_tool(choice: dict[str, Any] | None) -> str | None:
    """Anthropic's `tool_choice` as the backend reads it: `any` is "required", `tool` its name."""
    if choice is None:
        return None
    if choice.get("type") == "any":
        return "required"
    name = choice.get("name")
    return name if choice.get("type") == "tool" and isinstance(name, str) and name else None


def conversation(messages: list[MessageParam]) -> list[Message]:
    """Anthropic's messages as the model's: tool results become tool messages, tool uses calls."""
    out: list[Message] = []
    for i, message in enumerate(messages):
        param = f"messages.{i}.content"
        if isinstance(message.content, str):
            out.append(Message(message.role, message.content))
            continue
        texts: list[str] = []
        calls: list[ToolCall] = []
        for j, block in enumerate(message.content):
            kind = block.get("type") if isinstance(block, dict) else None
            where = f"{param}.{j}"
            if kind == "text":
                texts.append(_block_text(block, where))
            elif kind == "tool_result" and message.role == "user":
                # Results come before any text in a user turn, as Anthropic requires of clients.
                out.append(
                    Message("tool", _result_text(block, where), tool_call_id=_id(block, "tool_use_id", where))
                )
            elif kind == "tool_use" and message.role == "assistant":
                arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
                calls.append(ToolCall(_id(block, "id", where), str(block.get("name") or ""), arguments))
            elif kind in ("thinking", "redacted_thinking"):
                continue  # a hosted model's reasoning: nothing this model can use
            elif kind in ("image", "document"):
                raise InvalidRequest(
                    f"This model reads text only; {kind} blocks are not supported.", param=where
                )
            else:
                raise InvalidRequest(f"Unsupported content block type {kind!r}.", param=where)
        if texts or calls or message.role == "assistant":  # a system message keeps its place
            out.append(Message(message.role, "\n\n".join(texts), tuple(calls)))
    return out


def _block_text(block: Any, param: str) -> str:
    if not isinstance(block, dict) or not isinstance(block.get("text"), str):
        raise InvalidRequest("A text block needs a text string.", param=param)
    return block["text"]


def _result_text(block: dict[str, Any], param: str) -> str:
    content = block.get("content", "")
    if isinstance(content, list):
        content = "\n".join(
            _block_text(part, f"{param}.content") for part in content if part.get("type") == "text"
        )
    if not isinstance(content, str):
        raise InvalidRequest("A tool_result's content must be a string or text blocks.", param=param)
    return f"Error: {content}" if block.get("is_error") else content


def _id(block: dict[str, Any], key: str, param: str) -> str:
    value = block.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"A {block.get('type')} block needs its {key}.", param=f"{param}.{key}")
    return value


def turn_request(
    req: MessagesRequest,
    defaults: SamplingParams,
    session: str | None,
    tenant: str | None = None,
    tool_grammar: bool = True,
) -> TurnRequest:
    """The backend turn a Messages request asks for; `tool_grammar` is the server's default."""
    sampling = SamplingParams(
        temperature=defaults.temperature if req.temperature is None else req.temperature,
        top_p=defaults.top_p if req.top_p is None else req.top_p,
        top_k=defaults.top_k if req.top_k is None else req.top_k,
    )
    return TurnRequest(
        system_text(req.system),
        conversation(req.messages),
        tuple(tool_list(req.tools, req.tool_choice)),
        max_tokens=req.max_tokens,
        sampling=sampling,
        stop=tuple(req.stop_sequences or ()),
        session=session,
        input_param="messages",
        tenant=tenant,
        tool_grammar=wants_tool_grammar(req.whiz, tool_grammar),
        tool_choice=_required_tool(req.tool_choice),
    )


# -- the reply ---------------------------------------------------------------------------------------


def usage(prompt_tokens: int, cached_tokens: int, output_tokens: int) -> dict[str, Any]:
    """Every field of Anthropic's `Usage`. Anthropic counts cached input apart: input_tokens is
    what was not in the cache. whiz writes no cache entries a client pays for, and runs no
    server tools."""
    return {
        "input_tokens": prompt_tokens - cached_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached_tokens,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
        "output_tokens": output_tokens,
        "server_tool_use": None,
        "service_tier": "standard",
    }


def result_usage(result: TurnResult) -> dict[str, Any]:
    return usage(result.stats.prompt_tokens, result.stats.cached_tokens, result.output_tokens)


def stop_reason(result: TurnResult) -> str:
    if result.tool_calls:
        return "tool_use"
    return "max_tokens" if result.finish_reason == "length" else "end_turn"


def tool_use_block(call: ToolCall) -> dict[str, Any]:
    arguments = call.arguments_object()
    return {
        "type": "tool_use",
        "id": call.id,
        "name": call.name,
        "input": arguments if isinstance(arguments, dict) else {"input": arguments},
    }


def message_object(
    req: MessagesRequest,
    message_id: str,
    *,
    content: list[dict[str, Any]],
    stop_reason: str | None,
    usage: dict[str, Any],
) -> dict[str, Any]:
    """Anthropic's `Message`, every field it requires: the whole reply, or (with no content and
    no stop reason yet) the one `message_start` carries."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def finished_message(req: MessagesRequest, message_id: str, result: TurnResult) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    text = result.message().content
    if text:
        content.append({"type": "text", "text": text})
    content += [tool_use_block(call) for call in result.tool_calls]
    out = message_object(
        req, message_id, content=content, stop_reason=stop_reason(result), usage=result_usage(result)
    )
    # As on the OpenAI APIs (docs/protocol.md, Timings); clients ignore it.
    out["whiz"] = timings(result.stats)
    return out


def error_body(exc: WhizError) -> dict[str, Any]:
    kind = ERROR_TYPES.get(exc.status, "api_error" if exc.status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": exc.message}}


def error_response(exc: WhizError) -> JSONResponse:
    headers = {"retry-after": "1"} if exc.status in (429, 503) else None
    return JSONResponse(error_body(exc), status_code=exc.status, headers=headers)


def _sse(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


PING = _sse("ping", {"type": "ping"})
"""Anthropic's keep-alive event, sent after every `KEEPALIVE_S` of silence (see `keepalive.py`)."""


async def stream_events(req: MessagesRequest, message_id: str, turn) -> AsyncIterator[str]:
    """The streamed reply: message_start, a content block per text run and per tool use, then
    message_delta with the stop reason and usage, and message_stop. A failure midway is an
    `error` event, as Anthropic's API sends."""
    start = message_object(
        req, message_id, content=[], stop_reason=None, usage=usage(turn.prompt_tokens, 0, 0)
    )
    yield _sse("message_start", {"type": "message_start", "message": start})
    yield PING
    index, text_open = 0, False
    try:
        async for piece in turn.events():
            if isinstance(piece, TextDelta):
                if not piece.text:
                    continue
                if not text_open:
                    block = {"type": "text", "text": ""}
                    yield _sse(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": block},
                    )
                    text_open = True
                delta = {"type": "text_delta", "text": piece.text}
                yield _sse(
                    "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
                )
                continue
            if text_open:
                yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
                index, text_open = index + 1, False
            block = {**tool_use_block(piece), "input": {}}
            yield _sse(
                "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
            )
            arguments = json.dumps(tool_use_block(piece)["input"], ensure_ascii=False)
            delta = {"type": "input_json_delta", "partial_json": arguments}
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
    except WhizError as exc:
        yield _sse("error", error_body(exc))
        return
    finally:
        turn.cancel()  # also when the client went away: the engine stops within a step
    if text_open:
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    result = turn.result
    if result is None:
        yield _sse("error", error_body(WhizError("The reply ended without a result.")))
        return
    delta = {"stop_reason": stop_reason(result), "stop_sequence": None}
    last = {
        "type": "message_delta",
        "delta": delta,
        "usage": result_usage(result),
        "whiz": timings(result.stats),
    }
    yield _sse("message_delta", last)
    yield _sse("message_stop", {"type": "message_stop"})


# -- the routes --------------------------------------------------------------------------------------


def messages_routes(state: ServerState) -> list[BaseRoute]:
    """`POST /v1/messages` and `POST /v1/messages/count_tokens`."""

    async def create(request: Request) -> Response:
        try:
            req, key, size = await read_request(state, request, MessagesRequest)
            spec = turn_request(
                req,
                state.defaults.sampling,
                session_header(request.headers),
                state.tenant(key, request.headers),
                state.defaults.tool_grammar,
            )
            # Rendering and tokenizing megabytes, or building the tools' grammar, would stall others.
            if size > OFF_LOOP_CHARS or req.tools:
                turn = await asyncio.to_thread(state.backend.start, spec)
            else:
                turn = state.backend.start(spec)
            await turn.open()
        except WhizError as exc:
            state.metrics.error(exc.code)
            return error_response(exc)
        state.metrics.request("messages")
        message_id = "msg_" + uuid.uuid4().hex[:24]
        if req.stream:
            headers = {"Cache-Control": "no-cache"}
            events = with_keepalive(stream_events(req, message_id, turn), lambda: PING)
            return StreamingResponse(events, media_type="text/event-stream", headers=headers)

        try:
            await run_to_end(request, turn.events(), turn.cancel)
        except ClientGone:
            return Response(status_code=499)
        except WhizError as exc:
            state.metrics.error(exc.code)
            return error_response(exc)
        assert turn.result is not None
        return JSONResponse(finished_message(req, message_id, turn.result))

    async def count_tokens(request: Request) -> Response:
        try:
            req, _, size = await read_request(state, request, CountTokensRequest)
            texts = [system_text(req.system) or ""]
            for message in conversation(req.messages):
                texts.append(message.content)
                texts += [call.name + call.arguments for call in message.tool_calls]
            texts += [json.dumps(t.as_chat_tool()) for t in tool_list(req.tools, None)]
        except WhizError as exc:
            return error_response(exc)

        # The texts, plus the few tokens the chat template adds around each message.
        def count() -> int:
            return sum(state.backend.count_tokens(text) for text in texts if text) + 5 * len(texts)

        total = await asyncio.to_thread(count) if size > OFF_LOOP_CHARS else count()
        return JSONResponse({"input_tokens": total})

    return [
        Route(MESSAGES_PATH, create, methods=["POST"]),
        Route(f"{MESSAGES_PATH}/count_tokens", count_tokens, methods=["POST"]),
    ]
