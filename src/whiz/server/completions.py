"""`POST /infill` (llama.cpp's server) and `POST /v1/completions` (OpenAI's legacy Completions API).

Editor plugins ask these for a completion at the cursor: llama.vscode and llama.vim send
`input_prefix`/`input_suffix` to /infill; Continue, Tabby-style clients and the openai SDK send
`prompt` + `suffix` to /v1/completions. Both run on `whiz.completion.service`, so both get the
keystroke-shaped cache reuse, the stale-request cancel and the stop rules. A /v1/completions request
without `suffix` continues its prompt as it is (special tokens in it are read as such, for clients
that write their own FIM template).

Whose keystrokes a request is (which earlier one it makes stale): llama.cpp's `id_slot`, OpenAI's
`user`, an `X-Whiz-Client` or session header; else, for a completion at a cursor, the client's
address. Plain prompts with none of these never cancel each other.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from pydantic import Field, field_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from whiz.completion.fim import ExtraFile, FimInput
from whiz.completion.service import Completion, CompletionRequest, CompletionResult, CompletionService
from whiz.engine.types import SamplingParams
from whiz.errors import InvalidRequest, WhizError
from whiz.server.http import ClientGone, until_disconnected
from whiz.server.protocol import INT64, MAX_STOP, MAX_STOP_CHARS, OFF_LOOP_CHARS, Wire
from whiz.server.state import ServerState

BodyReader = Callable[[Request, type], Awaitable[tuple[Any, str | None]]]
"""The app's reader of API bodies: key check, rate limit, bounded read, validation."""

MAX_EXTRA_FILES = 256
CLIENT_HEADERS = ("x-whiz-client", "x-session-id", "session_id", "session-id")


def _bounded_stops(stop: str | list[str] | None) -> str | list[str] | None:
    stops = [stop] if isinstance(stop, str) else stop or []
    if len(stops) > MAX_STOP:
        raise ValueError(f"at most {MAX_STOP} stop sequences are allowed")
    if any(len(s) > MAX_STOP_CHARS for s in stops):
        raise ValueError(f"each stop sequence may hold at most {MAX_STOP_CHARS} characters")
    return stop


def _stops(stop: str | list[str] | None) -> list[str]:
    return [stop] if isinstance(stop, str) else list(stop or [])


class Sampling(Wire):
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    seed: int | None = Field(default=None, ge=-INT64, lt=INT64)
    stream: bool = False

    def sampling(self) -> SamplingParams:
        """Greedy unless the request asks otherwise: the same keystroke gets the same completion."""
        seed = None if self.seed is None else self.seed % 2**64
        return SamplingParams(self.temperature or 0.0, self.top_p or 1.0, self.top_k or 0, seed)


class ExtraChunk(Wire):
    filename: str = ""
    text: str


class InfillRequest(Sampling):
    """llama.cpp's /infill body (its other /completion options are accepted and ignored)."""

    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: list[ExtraChunk] = Field(default_factory=list, max_length=MAX_EXTRA_FILES)
    prompt: str = ""
    """The cursor's line up to the cursor, in llama.vim's and llama.vscode's requests."""
    n_predict: int | None = Field(default=None, ge=-1)
    t_max_predict_ms: float | None = Field(default=None, ge=0)
    n_indent: int = Field(default=0, ge=0)
    stop: str | list[str] | None = None
    id_slot: int | None = None
    response_fields: list[str] | None = None
    filename: str | None = None
    """whiz's: the path of the file being edited, for the repository-level prompt."""

    _stop = field_validator("stop")(_bounded_stops)


class CompletionsRequest(Sampling):
    """OpenAI's legacy Completions body."""

    model: str | None = None
    prompt: str | list[str]
    suffix: str | None = None
    max_tokens: int | None = Field(default=None, ge=0)
    stop: str | list[str] | None = None
    echo: bool = False
    n: int = 1
    best_of: int | None = None
    logprobs: int | None = None
    user: str | None = None
    stream_options: dict | None = None

    _stop = field_validator("stop")(_bounded_stops)

    def text(self) -> str:
        if isinstance(self.prompt, str):
            return self.prompt
        if len(self.prompt) != 1:
            raise InvalidRequest(
                "Send one prompt per request (a list of exactly one string).", param="prompt"
            )
        return self.prompt[0]

    def check(self) -> None:
        if self.echo:
            raise InvalidRequest(
                "echo is not supported: the response holds the completion only.", param="echo"
            )
        if self.n != 1 or (self.best_of or 1) != 1:
            raise InvalidRequest(
                "This server returns one completion per request (n and best_of 1).", param="n"
            )
        if self.logprobs:
            raise InvalidRequest("logprobs are not supported.", param="logprobs")


def timings(result: CompletionResult) -> dict:
    s = result.stats
    out = {
        "cache_n": s.cached_tokens,
        "prompt_n": s.prefill_tokens,
        "prompt_ms": round(s.prefill_ms, 3),
        "predicted_n": result.output_tokens,
        "predicted_ms": round(s.decode_ms, 3),
    }
    for kind in ("prompt", "predicted"):
        n, ms = out[f"{kind}_n"], out[f"{kind}_ms"]
        out[f"{kind}_per_token_ms"] = round(ms / n, 3) if n else 0.0
        out[f"{kind}_per_second"] = round(n * 1000 / ms, 3) if ms else 0.0
    return out


def _pick(body: dict, fields: list[str]) -> dict:
    """llama.cpp's `response_fields`: only these, each under its own path ("timings/prompt_n")."""
    out = {}
    for path in fields:
        value: Any = body
        for part in path.split("/"):
            if not isinstance(value, dict) or part not in value:
                break
            value = value[part]
        else:
            out[path] = value
    return out


def sse_lines(events: AsyncIterator[dict], *, done: bool) -> StreamingResponse:
    async def body():
        async for ev in events:
            yield f"data: {json.dumps(ev)}\n\n"
        if done:
            yield "data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def completions_routes(state: ServerState, read_body: BodyReader) -> list[BaseRoute]:
    """The two completion routes over `state`'s engine (none behind a gateway: a 400 says so)."""
    engine = getattr(state.backend, "engine", None)
    service = CompletionService(engine) if engine is not None else None

    async def start(
        request: Request, key: str | None, req: CompletionRequest, explicit: str | None
    ) -> Completion:
        if service is None:
            raise InvalidRequest(
                "Completions need the model in this server; it forwards to upstream servers instead.",
                code="unsupported",
            )
        tenant = state.tenant(key, request.headers)
        explicit = explicit or next(
            (request.headers[h] for h in CLIENT_HEADERS if request.headers.get(h)), None
        )
        if explicit is not None:
            req.client = f"{tenant}:{explicit}"
        elif req.fim is not None:  # one person types at one cursor at a time
            req.client = f"{tenant}:addr:{request.client.host if request.client else ''}"
        req.tenant = tenant
        if req.fim is not None:
            service.vocab()  # a model without FIM tokens is refused before any tokenizing
        chars = len(req.raw_prompt) + (_chars(req.fim) if req.fim is not None else 0)
        if chars > OFF_LOOP_CHARS:  # tokenizing megabytes on the event loop would stall every stream
            completion = await asyncio.to_thread(service.prepare, req)
        else:
            completion = service.prepare(req)
        return service.launch(completion)

    async def run(request: Request, completion: Completion) -> CompletionResult | None:
        async def drain() -> CompletionResult:
            async for _ in completion.deltas():
                pass
            assert completion.result is not None
            return completion.result

        try:
            return await until_disconnected(request, drain())
        except ClientGone:
            return None

    async def infill(request: Request) -> Response:
        body, key = await read_body(request, InfillRequest)
        fim = FimInput(
            body.input_prefix + body.prompt,
            body.input_suffix,
            tuple(ExtraFile(c.filename, c.text) for c in body.input_extra),
            body.filename,
        )
        req = CompletionRequest(
            fim,
            max_tokens=body.n_predict,
            sampling=body.sampling(),
            stop=_stops(body.stop),
            n_indent=body.n_indent,
            t_max_predict_ms=body.t_max_predict_ms or None,
        )
        slot = body.id_slot if body.id_slot is not None and body.id_slot >= 0 else None
        completion = await start(request, key, req, None if slot is None else f"slot:{slot}")
        state.metrics.request("infill")

        def final(result: CompletionResult) -> dict:
            out = {
                "index": 0,
                "content": result.text,
                "tokens": [],
                "id_slot": -1 if slot is None else slot,
                "stop": True,
                "model": state.model_name,
                "tokens_predicted": result.output_tokens,
                "tokens_evaluated": result.prompt_tokens,
                "generation_settings": {
                    "n_ctx": state.backend.info.n_ctx,
                    "n_predict": req.max_tokens if req.max_tokens is not None else -1,
                    "temperature": req.sampling.temperature,
                    "n_indent": body.n_indent,
                },
                "prompt": "",
                "has_new_line": "\n" in result.text,
                "truncated": result.truncated,
                "stop_type": "none" if result.stop_type == "cancelled" else result.stop_type,
                "stopped_eos": result.stop_type == "eos",
                "stopped_word": result.stop_type == "word",
                "stopped_limit": result.stop_type == "limit",
                "stopping_word": result.stopping_word,
                "tokens_cached": result.prompt_tokens + result.output_tokens,
                "timings": timings(result),
                "whiz": {"cancelled": result.stop_type == "cancelled"},
            }
            state.metrics.finished({"usage": _usage(result)})
            return _pick(out, body.response_fields) if body.response_fields else out

        if body.stream:

            async def events() -> AsyncIterator[dict]:
                try:
                    async for delta in completion.deltas():
                        yield {"index": 0, "content": delta, "tokens": [], "stop": False, "id_slot": -1}
                except WhizError as exc:
                    yield {"error": exc.to_dict()}
                    return
                finally:
                    completion.cancel()
                assert completion.result is not None
                yield final(completion.result) | {"content": ""}  # it all came in the chunks before

            return sse_lines(events(), done=False)
        result = await run(request, completion)
        return Response(status_code=499) if result is None else JSONResponse(final(result))

    async def completions(request: Request) -> Response:
        body, key = await read_body(request, CompletionsRequest)
        body.check()
        prompt = body.text()
        fim = FimInput(prompt, body.suffix) if body.suffix is not None else None
        req = CompletionRequest(
            fim,
            raw_prompt=prompt,
            max_tokens=body.max_tokens,
            sampling=body.sampling(),
            stop=_stops(body.stop),
        )
        completion = await start(request, key, req, body.user)
        state.metrics.request("completions")
        cid, created = "cmpl-" + uuid.uuid4().hex[:24], int(time.time())
        model = body.model or state.model_name

        def chunk(text: str, finish: str | None) -> dict:
            choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish}
            return {
                "id": cid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [choice],
            }

        if body.stream:
            usage_chunk = bool((body.stream_options or {}).get("include_usage"))

            async def events() -> AsyncIterator[dict]:
                try:
                    async for delta in completion.deltas():
                        yield chunk(delta, None)
                except WhizError as exc:
                    yield {"error": exc.to_dict()}
                    return
                finally:
                    completion.cancel()
                result = completion.result
                assert result is not None
                yield chunk("", _finish_reason(result))
                state.metrics.finished({"usage": _usage(result)})
                if usage_chunk:
                    yield {**chunk("", None), "choices": [], "usage": _usage(result)}

            return sse_lines(events(), done=True)
        result = await run(request, completion)
        if result is None:
            return Response(status_code=499)
        out = chunk(result.text, _finish_reason(result)) | {"usage": _usage(result)}
        state.metrics.finished(out)
        return JSONResponse(out)

    return [
        Route("/infill", infill, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
    ]


def _chars(fim: FimInput) -> int:
    return len(fim.before) + len(fim.after) + sum(len(f.text) + len(f.filename) for f in fim.extra)


def _finish_reason(result: CompletionResult) -> str:
    return {"limit": "length", "cancelled": "cancelled"}.get(result.stop_type, "stop")


def _usage(result: CompletionResult) -> dict:
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.output_tokens,
        "total_tokens": result.prompt_tokens + result.output_tokens,
        "prompt_tokens_details": {"cached_tokens": result.stats.cached_tokens},
    }
