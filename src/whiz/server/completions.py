"""`POST /infill` (llama.cpp's server) and `POST /v1/completions` (OpenAI's legacy Completions API).

Editor plugins ask these for a completion at the cursor: llama.vscode and llama.vim send
`input_prefix`/`input_suffix` to /infill; Continue, Tabby-style clients and the openai SDK send
`prompt` + `suffix` to /v1/completions. Both run on `whiz.completion.service`, so both get the
keystroke-shaped cache reuse, the stale-request cancel and the stop rules. A /v1/completions request
without `suffix` continues its prompt as it is (special tokens in it are read as such, for clients
that write their own FIM template). The bodies' shapes are in `completion_wire.py`.

Whose keystrokes a request is (which earlier one it makes stale): llama.cpp's `id_slot`, OpenAI's
`user`, an `X-Whiz-Client` or session header; else, for a completion at a cursor, the client's
address. Plain prompts with none of these never cancel each other.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from whiz.completion.service import Completion, CompletionRequest, CompletionResult, CompletionService
from whiz.errors import InvalidRequest, WhizError
from whiz.server.completion_wire import (
    CompletionsRequest,
    InfillRequest,
    fim_chars,
    finish_reason,
    infill_body,
    infill_delta,
    text_completion,
    usage,
)
from whiz.server.http import ClientGone, until_disconnected
from whiz.server.protocol import OFF_LOOP_CHARS
from whiz.server.requests import read_request, session_header
from whiz.server.state import ServerState


def sse_lines(events: AsyncIterator[dict], *, done: bool) -> StreamingResponse:
    async def body():
        async for ev in events:
            yield f"data: {json.dumps(ev)}\n\n"
        if done:
            yield "data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


class Completions:
    """What both routes share over `state`'s engine (none behind a gateway: a 400 says so)."""

    def __init__(self, state: ServerState):
        self.state = state
        engine = getattr(state.backend, "engine", None)
        self.service = CompletionService(engine) if engine is not None else None

    async def start(
        self, request: Request, key: str | None, req: CompletionRequest, explicit: str | None
    ) -> Completion:
        if self.service is None:
            raise InvalidRequest(
                "Completions need the model in this server; it forwards to upstream servers instead.",
                code="unsupported",
            )
        tenant = self.state.tenant(key, request.headers)
        explicit = explicit or request.headers.get("x-whiz-client") or session_header(request.headers)
        if explicit is not None:
            req.client = f"{tenant}:{explicit}"
        elif req.fim is not None:  # one person types at one cursor at a time
            req.client = f"{tenant}:addr:{request.client.host if request.client else ''}"
        req.tenant = tenant
        if req.fim is not None:
            self.service.vocab()  # a model without FIM tokens is refused before any tokenizing
        chars = len(req.raw_prompt) + (fim_chars(req.fim) if req.fim is not None else 0)
        if chars > OFF_LOOP_CHARS:  # tokenizing megabytes on the event loop would stall every stream
            completion = await asyncio.to_thread(self.service.prepare, req)
        else:
            completion = self.service.prepare(req)
        return self.service.launch(completion)

    @staticmethod
    async def run(request: Request, completion: Completion) -> CompletionResult | None:
        """The whole completion, or None when the client left first (the completion is cancelled)."""

        async def drain() -> CompletionResult:
            async for _ in completion.deltas():
                pass
            assert completion.result is not None
            return completion.result

        try:
            return await until_disconnected(request, drain())
        except ClientGone:
            return None

    @staticmethod
    async def chunks(completion: Completion, chunk, last) -> AsyncIterator[dict]:
        """Each delta as `chunk(text)`, then `last(result)`'s events; an error mid-way is the last
        event, and a client that stops reading cancels the completion."""
        try:
            async for delta in completion.deltas():
                yield chunk(delta)
        except WhizError as exc:
            yield {"error": exc.to_dict()}
            return
        finally:
            completion.cancel()
        assert completion.result is not None
        for event in last(completion.result):
            yield event

    def finished(self, result: CompletionResult) -> None:
        self.state.metrics.finished({"usage": usage(result)})


def completions_routes(state: ServerState) -> list[BaseRoute]:
    """The two completion routes."""
    shared = Completions(state)

    async def infill(request: Request) -> Response:
        body, key, _ = await read_request(state, request, InfillRequest)
        req = body.completion_request()
        completion = await shared.start(request, key, req, body.client())
        state.metrics.request("infill")

        def final(result: CompletionResult) -> dict:
            shared.finished(result)
            return infill_body(result, body, req, model=state.model_name, n_ctx=state.backend.info.n_ctx)

        def last(result: CompletionResult) -> list[dict]:
            return [final(result) | {"content": ""}]  # the text all came in the chunks before

        if body.stream:
            return sse_lines(shared.chunks(completion, infill_delta, last), done=False)
        result = await shared.run(request, completion)
        return Response(status_code=499) if result is None else JSONResponse(final(result))

    async def completions(request: Request) -> Response:
        body, key, _ = await read_request(state, request, CompletionsRequest)
        body.check()
        completion = await shared.start(request, key, body.completion_request(), body.user)
        state.metrics.request("completions")
        cid, created, model = (
            "cmpl-" + uuid.uuid4().hex[:24],
            int(time.time()),
            body.model or state.model_name,
        )

        def chunk(text: str, finish: str | None = None) -> dict:
            return text_completion(cid, created, model, text, finish)

        if body.stream:
            with_usage = bool((body.stream_options or {}).get("include_usage"))

            def last(result: CompletionResult) -> list[dict]:
                shared.finished(result)
                tail = [{**chunk(""), "choices": [], "usage": usage(result)}] if with_usage else []
                return [chunk("", finish_reason(result)), *tail]

            return sse_lines(shared.chunks(completion, chunk, last), done=True)
        result = await shared.run(request, completion)
        if result is None:
            return Response(status_code=499)
        shared.finished(result)
        return JSONResponse(chunk(result.text, finish_reason(result)) | {"usage": usage(result)})

    return [
        Route("/infill", infill, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
    ]
