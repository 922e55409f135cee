"""POST /v1/chat/completions: OpenAI's Chat Completions, streaming and not, with tool calls."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

from whiz.chat.template import ChatTemplate
from whiz.engine.types import SamplingParams
from whiz.errors import ContextOverflow
from whiz.seams import Engine
from whiz.server.protocol import ChatRequest
from whiz.server.responses import timings
from whiz.server.turns import TextDelta, Turn, TurnResult, TurnSpec


def _usage(result: TurnResult) -> dict:
    s = result.stats
    n_out = len(result.output_tokens)
    return {
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": n_out,
        "total_tokens": s.prompt_tokens + n_out,
        "prompt_tokens_details": {"cached_tokens": s.cached_tokens},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "accepted_prediction_tokens": s.draft_accepted,
            "rejected_prediction_tokens": s.draft_rejected,
        },
    }


def _finish_reason(result: TurnResult) -> str:
    if result.tool_calls:
        return "tool_calls"
    return "length" if result.finish_reason == "length" else "stop"


def _tool_call_json(call, index: int | None = None) -> dict:
    out = {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
    if index is not None:
        out["index"] = index
    return out


class ChatService:
    """Runs chat completion requests over one engine."""

    def __init__(self, engine: Engine, template: ChatTemplate, *, model_name: str, defaults: SamplingParams):
        self.engine = engine
        self.template = template
        self.model_name = model_name
        self.defaults = defaults

    def start(self, req: ChatRequest) -> Turn:
        """Validate and start a turn (raises before anything is sent)."""
        tools = req.tool_list()
        prompt = self.template.encode(req.conversation(), tools)
        limit = self.engine.info.n_ctx
        if len(prompt) >= limit:
            raise ContextOverflow(len(prompt), limit, param="messages")
        sampling = req.sampling(self.defaults)
        prediction = self.engine.tokenizer.encode(req.prediction.text()) if req.prediction else None
        spec = TurnSpec(
            prompt,
            req.limit() or limit,
            sampling,
            stop=req.stop_list(),
            parse_tools=bool(tools),
            prediction=prediction,
            speculation=req.speculation(),
        )
        return Turn(self.engine, spec)

    def _envelope(self, req: ChatRequest, cid: str, created: int, obj: str) -> dict:
        return {"id": cid, "object": obj, "created": created, "model": req.model or self.model_name}

    async def complete(self, req: ChatRequest) -> dict:
        turn = self.start(req)
        async for _ in turn.events():
            pass
        result = turn.result
        self.template.remember(result.body, result.output_tokens)
        message: dict = {"role": "assistant", "content": result.message().content or None}
        if result.tool_calls:
            message["tool_calls"] = [_tool_call_json(c) for c in result.tool_calls]
        return {
            **self._envelope(req, "chatcmpl-" + uuid.uuid4().hex, int(time.time()), "chat.completion"),
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(result)}
            ],
            "usage": _usage(result),
            "whiz": timings(result.stats),
        }

    async def stream(self, req: ChatRequest, turn: Turn) -> AsyncIterator[dict]:
        """The chunks of a streamed completion (the caller frames them as SSE and adds [DONE])."""
        base = self._envelope(req, "chatcmpl-" + uuid.uuid4().hex, int(time.time()), "chat.completion.chunk")

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        n_calls = 0
        async for piece in turn.events():
            if isinstance(piece, TextDelta):
                yield chunk({"content": piece.text})
            else:
                yield chunk({"tool_calls": [_tool_call_json(piece, n_calls)]})
                n_calls += 1
        result = turn.result
        self.template.remember(result.body, result.output_tokens)
        last = chunk({}, _finish_reason(result))
        last["whiz"] = timings(result.stats)
        yield last
        if req.stream_options and req.stream_options.include_usage:
            yield {**base, "choices": [], "usage": _usage(result), "whiz": timings(result.stats)}
