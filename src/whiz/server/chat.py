"""POST /v1/chat/completions: OpenAI's Chat Completions, streaming and not, with tool calls."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

from whiz.backend.types import TextDelta, TurnRequest, TurnResult
from whiz.engine.types import SamplingParams
from whiz.errors import WhizError
from whiz.seams import Backend, BackendTurn
from whiz.server.protocol import ChatRequest
from whiz.server.responses import timings


def _usage(result: TurnResult) -> dict:
    s = result.stats
    n_out = result.output_tokens
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
    """Runs chat completion requests on one backend."""

    def __init__(self, backend: Backend, *, model_name: str, defaults: SamplingParams):
        self.backend = backend
        self.model_name = model_name
        self.defaults = defaults

    def start(self, req: ChatRequest, session: str | None = None) -> BackendTurn:
        """Validate a turn (raises before anything is sent); it runs once opened or iterated."""
        messages = req.conversation()
        system = None
        if messages and messages[0].role == "system":
            system, messages = messages[0].content, messages[1:]
        request = TurnRequest(
            system,
            messages,
            tuple(req.tool_list()),
            max_tokens=req.limit(),
            sampling=req.sampling(self.defaults),
            stop=req.stop_list(),
            prediction=req.prediction.text() if req.prediction else None,
            speculation=req.speculation(),
            session=session,
            cache_key=req.prompt_cache_key,
            input_param="messages",
        )
        return self.backend.start(request)

    def _envelope(self, req: ChatRequest, cid: str, created: int, obj: str) -> dict:
        return {"id": cid, "object": obj, "created": created, "model": req.model or self.model_name}

    async def complete(self, req: ChatRequest, session: str | None = None) -> dict:
        turn = self.start(req, session)
        async for _ in turn.events():
            pass
        result = turn.result
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

    async def stream(self, req: ChatRequest, turn: BackendTurn) -> AsyncIterator[dict]:
        """The chunks of a streamed completion (the caller frames them as SSE and adds [DONE]).

        A backend that fails mid-stream ends it with an `error` chunk, as OpenAI's API does.
        """
        base = self._envelope(req, "chatcmpl-" + uuid.uuid4().hex, int(time.time()), "chat.completion.chunk")

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {
                **base,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        n_calls = 0
        try:
            async for piece in turn.events():
                if isinstance(piece, TextDelta):
                    yield chunk({"content": piece.text})
                else:
                    yield chunk({"tool_calls": [_tool_call_json(piece, n_calls)]})
                    n_calls += 1
        except WhizError as exc:
            yield {"error": exc.to_dict()}
            return
        result = turn.result
        last = chunk({}, _finish_reason(result))
        last["whiz"] = timings(result.stats)
        yield last
        if req.stream_options and req.stream_options.include_usage:
            yield {**base, "choices": [], "usage": _usage(result), "whiz": timings(result.stats)}
