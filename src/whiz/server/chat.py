"""POST /v1/chat/completions: OpenAI's Chat Completions, streaming and not, with tool calls.

`n` > 1 asks for several candidates of one prompt; the backend runs them together where it can
(the engine prefills the prompt once and decodes the candidates in one batch). They arrive as
`choices[i]`, and streamed chunks carry each candidate's `index`, interleaved as the candidates
produce text.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence

from whiz import __version__
from whiz.backend.types import TextDelta, TurnRequest, TurnResult
from whiz.errors import InvalidRequest, WhizError
from whiz.seams import Backend, BackendTurn
from whiz.server.protocol import OFF_LOOP_CHARS, ChatRequest, TurnDefaults, input_chars, required_tool
from whiz.server.responses import timings


def _usage(results: Sequence[TurnResult]) -> dict:
    """Usage of one request: the prompt counts once, every candidate's output counts."""
    first = results[0].stats
    n_out = sum(r.output_tokens for r in results)
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


def system_fingerprint(model: str) -> str:
    """OpenAI's name for the configuration that answered: here the server's model and whiz's
    version, so a client sees when either changed."""
    return f"fp_whiz_{__version__}_{model}"


def _finish_reason(result: TurnResult) -> str:
    if result.tool_calls:
        return "tool_calls"
    return "length" if result.finish_reason == "length" else "stop"


def _whiz(req: ChatRequest, result: TurnResult) -> dict:
    """whiz's figures of one candidate, and, where the reply continued the last message, that it
    did: a client can tell from it that this server honoured `continue_final_message`."""
    out = timings(result.stats)
    return {**out, "continued": True} if req.continue_final_message else out


def _tool_call_json(call, index: int | None = None) -> dict:
    out = {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
    if index is not None:
        out["index"] = index
    return out


class ChatService:
    """Runs chat completion requests on one backend."""

    def __init__(self, backend: Backend, defaults: TurnDefaults, *, max_n: int | None = None):
        self.backend = backend
        self.defaults = defaults
        self.max_n = max_n

    def start(
        self, req: ChatRequest, session: str | None = None, tenant: str | None = None
    ) -> list[BackendTurn]:
        """Validate the request's turns, one per candidate (raises before anything is sent)."""
        if self.max_n is not None and req.n > self.max_n:
            raise InvalidRequest(
                f"n is {req.n}, but this server generates at most {self.max_n} candidates per request.",
                param="n",
            )
        messages = req.conversation()
        system = None
        if messages and messages[0].role == "system":
            system, messages = messages[0].content, messages[1:]
        request = TurnRequest(
            system,
            messages,
            tuple(req.tool_list()),
            max_tokens=req.limit() or self.defaults.max_tokens,
            sampling=req.sampling(self.defaults.sampling),
            stop=req.stop_list(),
            prediction=req.prediction.text() if req.prediction else None,
            speculation=req.speculation(),
            tool_grammar=req.tool_grammar(self.defaults.tool_grammar),
            tool_choice=required_tool(req.tool_choice),
            session=session,
            cache_key=req.prompt_cache_key,
            input_param="messages",
            tenant=tenant,
            continue_last=req.continue_final_message,
        )
        return self.backend.start_many(request, req.n)

    async def start_async(
        self, req: ChatRequest, session: str | None = None, tenant: str | None = None
    ) -> list[BackendTurn]:
        """`start`, on a worker thread where it may be slow (a large prompt to tokenize, tools whose
        grammar to build), so the event loop keeps serving."""
        if input_chars(req) > OFF_LOOP_CHARS or req.tools:
            return await asyncio.to_thread(self.start, req, session, tenant)
        return self.start(req, session, tenant)

    async def open(
        self, req: ChatRequest, session: str | None = None, tenant: str | None = None
    ) -> list[BackendTurn]:
        """Start the turns; a backend that refuses one raises here, before any chunk is sent."""
        turns = await self.start_async(req, session, tenant)
        try:
            for turn in turns:
                await turn.open()
        except BaseException:
            for turn in turns:
                turn.cancel()
            raise
        return turns

    def _envelope(self, req: ChatRequest, cid: str, created: int, obj: str) -> dict:
        model = req.model or self.defaults.model_name
        return {
            "id": cid,
            "object": obj,
            "created": created,
            "model": model,
            "system_fingerprint": system_fingerprint(self.defaults.model_name),
        }

    async def complete(self, req: ChatRequest, session: str | None = None, tenant: str | None = None) -> dict:
        turns = await self.start_async(req, session, tenant)

        async def run(turn: BackendTurn) -> TurnResult:
            async for _ in turn.events():
                pass
            assert turn.result is not None
            return turn.result

        try:
            results = await asyncio.gather(*(run(t) for t in turns))
        finally:
            for turn in turns:
                turn.cancel()
        choices = []
        for i, result in enumerate(results):
            message: dict = {
                "role": "assistant",
                "content": result.message().content or None,
                "refusal": None,
            }
            if result.tool_calls:
                message["tool_calls"] = [_tool_call_json(c) for c in result.tool_calls]
            choice = {
                "index": i,
                "message": message,
                "logprobs": None,
                "finish_reason": _finish_reason(result),
            }
            if len(results) > 1:
                choice["whiz"] = _whiz(req, result)
            choices.append(choice)
        return {
            **self._envelope(req, "chatcmpl-" + uuid.uuid4().hex, int(time.time()), "chat.completion"),
            "choices": choices,
            "usage": _usage(results),
            "whiz": _whiz(req, results[0]),
        }

    async def stream(self, req: ChatRequest, turns: list[BackendTurn]) -> AsyncIterator[dict]:
        """The chunks of a streamed completion (the caller frames them as SSE and adds [DONE]).

        A backend that fails mid-stream ends it with an `error` chunk, as OpenAI's API does.
        """
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

        async def pump(i: int, turn: BackendTurn) -> None:
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
                    last = chunk(i, {}, _finish_reason(result))
                    last["whiz"] = _whiz(req, result)
                    yield last
                elif isinstance(piece, TextDelta):
                    yield chunk(i, {"content": piece.text})
                else:
                    yield chunk(i, {"tool_calls": [_tool_call_json(piece, n_calls[i])]})
                    n_calls[i] += 1
        except WhizError as exc:
            yield {"error": exc.to_dict()}
            return
        finally:
            # Also runs when the client goes away: stop every candidate within a step.
            for turn in turns:
                turn.cancel()
            for task in tasks:
                task.cancel()
        if req.stream_options and req.stream_options.include_usage:
            results = [t.result for t in turns if t.result is not None]
            yield {**base, "choices": [], "usage": _usage(results), "whiz": timings(results[0].stats)}
