"""POST /v1/chat/completions: OpenAI's Chat Completions, streaming and not, with tool calls.

`n` > 1 asks for several candidates of one prompt; the engine prefills the prompt once and
decodes the candidates together (`Engine.generate_many`). They arrive as `choices[i]`, and
streamed chunks carry each candidate's `index`, interleaved as the candidates produce text.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence

from whiz.chat.template import ChatTemplate
from whiz.engine.types import SamplingParams
from whiz.errors import ContextOverflow, InvalidRequest
from whiz.seams import Engine
from whiz.server.protocol import ChatRequest
from whiz.server.responses import timings
from whiz.server.turns import TextDelta, Turn, TurnResult, TurnSpec


def _usage(results: Sequence[TurnResult]) -> dict:
    """Usage of one request: the prompt counts once, every candidate's output counts."""
    first = results[0].stats
    n_out = sum(len(r.output_tokens) for r in results)
    return {
        "prompt_tokens": first.prompt_tokens,
        "completion_tokens": n_out,
        "total_tokens": first.prompt_tokens + n_out,
        "prompt_tokens_details": {"cached_tokens": first.cached_tokens},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "accepted_prediction_tokens": sum(r.stats.draft_accepted for r in results),
            "rejected_prediction_tokens": sum(r.stats.draft_rejected for r in results),
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

    def start(self, req: ChatRequest) -> list[Turn]:
        """Validate and start the request's turns, one per candidate (raises before anything is sent)."""
        if req.n > self.engine.info.n_seq_max:
            raise InvalidRequest(
                f"n is {req.n}, but this server decodes at most {self.engine.info.n_seq_max} "
                "candidates at once (its --slots).",
                param="n",
            )
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
        if req.n == 1:
            return [Turn(self.engine, spec)]
        return [
            Turn(self.engine, spec, stream) for stream in self.engine.generate_many(spec.request(), req.n)
        ]

    def _envelope(self, req: ChatRequest, cid: str, created: int, obj: str) -> dict:
        return {"id": cid, "object": obj, "created": created, "model": req.model or self.model_name}

    async def complete(self, req: ChatRequest) -> dict:
        turns = self.start(req)

        async def run(turn: Turn) -> TurnResult:
            async for _ in turn.events():
                pass
            return turn.result

        try:
            results = await asyncio.gather(*(run(t) for t in turns))
        finally:
            for turn in turns:
                turn.cancel()
        choices = []
        for i, result in enumerate(results):
            self.template.remember(result.body, result.output_tokens)
            message: dict = {"role": "assistant", "content": result.message().content or None}
            if result.tool_calls:
                message["tool_calls"] = [_tool_call_json(c) for c in result.tool_calls]
            choice = {
                "index": i,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(result),
            }
            if len(results) > 1:
                choice["whiz"] = timings(result.stats)
            choices.append(choice)
        return {
            **self._envelope(req, "chatcmpl-" + uuid.uuid4().hex, int(time.time()), "chat.completion"),
            "choices": choices,
            "usage": _usage(results),
            "whiz": timings(results[0].stats),
        }

    async def stream(self, req: ChatRequest, turns: list[Turn]) -> AsyncIterator[dict]:
        """The chunks of a streamed completion (the caller frames them as SSE and adds [DONE])."""
        base = self._envelope(req, "chatcmpl-" + uuid.uuid4().hex, int(time.time()), "chat.completion.chunk")

        def chunk(index: int, delta: dict, finish: str | None = None) -> dict:
            return {
                **base,
                "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }

        for i in range(len(turns)):
            yield chunk(i, {"role": "assistant", "content": ""})
        # Each candidate's pieces go through one queue, so chunks leave in the order they were made.
        pieces: asyncio.Queue = asyncio.Queue()
        done = object()

        async def pump(i: int, turn: Turn) -> None:
            try:
                async for piece in turn.events():
                    await pieces.put((i, piece))
            finally:
                await pieces.put((i, done))

        tasks = [asyncio.create_task(pump(i, t)) for i, t in enumerate(turns)]
        n_calls = [0] * len(turns)
        try:
            running = len(turns)
            while running:
                i, piece = await pieces.get()
                if piece is done:
                    running -= 1
                    result = turns[i].result
                    if result is None:  # the turn failed; its task holds the error
                        await tasks[i]
                        continue
                    self.template.remember(result.body, result.output_tokens)
                    last = chunk(i, {}, _finish_reason(result))
                    last["whiz"] = timings(result.stats)
                    yield last
                elif isinstance(piece, TextDelta):
                    yield chunk(i, {"content": piece.text})
                else:
                    yield chunk(i, {"tool_calls": [_tool_call_json(piece, n_calls[i])]})
                    n_calls[i] += 1
        finally:
            # Also runs when the client goes away: stop every candidate within a step.
            for turn in turns:
                turn.cancel()
            for task in tasks:
                task.cancel()
        if req.stream_options and req.stream_options.include_usage:
            results = [t.result for t in turns]
            yield {**base, "choices": [], "usage": _usage(results), "whiz": timings(results[0].stats)}
