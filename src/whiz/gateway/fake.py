"""A fake OpenAI-compatible upstream, shipped in the package so tests and demos need no model.

It streams chat completions like vLLM or llama-server do, keeps a prefix cache that reports
`cached_tokens` honestly (one character is one token), and can be told to misbehave: answer 500,
stream garbage, hang, or die mid-stream. Everything it saw is kept for assertions.

    fake = FakeUpstream()
    app = fake.app()          # any ASGI server runs it
    fake.mode = "die_mid"     # the next request fails halfway
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

Mode = Literal[
    "ok", "error", "bad_request", "unauthorized", "malformed", "not_sse", "no_choices",
    "hang", "hang_mid", "die_mid", "down",
]  # fmt: skip


def echo_reply(messages: list[dict[str, Any]]) -> str | dict:
    """'echo: ' and the last user message; a user message 'call NAME {json}' becomes a tool call."""
    if messages and messages[-1].get("role") == "tool":
        return f"tool said: {messages[-1].get('content')}"
    users = [m for m in messages if m.get("role") == "user"]
    text = str(users[-1].get("content", "")) if users else ""
    if text.startswith("call "):
        name, _, args = text[5:].partition(" ")
        return {"name": name, "arguments": args or "{}"}
    return "echo: " + text


def _render(messages: list[dict[str, Any]]) -> str:
    return "".join(f"<{m.get('role')}>{json.dumps(m.get('content'))}" for m in messages)


class FakeUpstream:
    """One fake upstream server: its behaviour, its prefix cache and what it was sent."""

    def __init__(
        self,
        script: Callable[[list[dict[str, Any]]], str | dict] = echo_reply,
        *,
        model: str = "fake-model",
        owned_by: str = "fake",
        piece_chars: int = 4,
        delay_s: float = 0.0,
        cache_slots: int = 4,
        version: str | None = None,
        salts: bool = False,
    ):
        self.script = script
        self.model = model
        self.owned_by = owned_by
        self.piece_chars = piece_chars
        self.delay_s = delay_s
        """Pause before each streamed piece (to cancel or kill a stream while it runs)."""
        self.cache_slots = cache_slots
        self.version = version
        """What `GET /version` answers (vLLM's shape); None: no such route."""
        self.salts = salts
        """Share cached prefixes only between requests with the same `cache_salt`, as vLLM does."""
        self.mode: Mode = "ok"
        self.bodies: list[dict[str, Any]] = []
        self.streams_closed_early = 0
        self.health_checks = 0
        self._cache: list[str] = []

    # -- the prefix cache ---------------------------------------------------------------------

    def _scoped(self, body: dict[str, Any], prompt: str) -> str:
        """The prompt as the cache files it: behind its salt when salts are honoured."""
        salt = body.get("cache_salt") if self.salts else None
        return f"{salt}\x00{prompt}" if isinstance(salt, str) and salt else prompt

    def _cached(self, prompt: str) -> int:
        best = 0
        for seen in self._cache:
            n = 0
            for a, b in zip(seen, prompt, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        return best

    def _cached_of(self, body: dict[str, Any], prompt: str) -> int:
        scoped = self._scoped(body, prompt)
        return max(self._cached(scoped) - (len(scoped) - len(prompt)), 0)

    def _remember(self, text: str) -> None:
        self._cache = [t for t in self._cache if not text.startswith(t)] + [text]
        self._cache = self._cache[-self.cache_slots :]

    # -- the app ------------------------------------------------------------------------------

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/health", self._health, methods=["GET"]),
                *([Route("/version", self._version, methods=["GET"])] if self.version else []),
            ]
        )

    async def _version(self, request: Request) -> Response:
        return JSONResponse({"version": self.version})

    async def _health(self, request: Request) -> Response:
        self.health_checks += 1
        if self.mode == "down":
            return JSONResponse({"status": "loading"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def _models(self, request: Request) -> Response:
        entry = {"id": self.model, "object": "model", "owned_by": self.owned_by, "context_window": 4096}
        return JSONResponse({"object": "list", "data": [entry]})

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        mode = self.mode
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode == "down":
            return JSONResponse({"error": {"message": "loading", "type": "server_error"}}, 503)
        if mode == "error":
            return JSONResponse({"error": {"message": "fake upstream exploded", "type": "server_error"}}, 500)
        if mode == "bad_request":
            error = {
                "message": "This model's maximum context length is 4096 tokens.",
                "code": "context_length_exceeded",
            }
            return JSONResponse(
                {"error": {**error, "type": "invalid_request_error", "param": "messages"}}, 400
            )
        if mode == "unauthorized":
            return JSONResponse({"error": {"message": "bad key", "type": "auth_error"}}, 401)
        if mode == "not_sse":
            return JSONResponse({"hello": "world"})
        messages = body.get("messages") or []
        prompt = _render(messages)
        reply = self.script(messages)
        max_tokens = body.get("max_tokens")
        text = reply if isinstance(reply, str) else ""
        finish = "stop"
        if max_tokens is not None and len(text) > max_tokens:
            text, finish = text[:max_tokens], "length"
        if isinstance(reply, dict):
            finish = "tool_calls"
        usage = {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(text) or 1,
            "total_tokens": len(prompt) + (len(text) or 1),
            "prompt_tokens_details": {"cached_tokens": self._cached_of(body, prompt)},
        }
        stream = self._stream(body, text, reply, finish, usage, prompt, mode)
        return StreamingResponse(stream, media_type="text/event-stream")

    async def _stream(self, body, text, reply, finish, usage, prompt, mode):  # noqa: ANN001
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time())}
        base["model"] = self.model

        def chunk(delta: dict, finish_reason: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            return f"data: {json.dumps({**base, 'choices': [choice]})}\n\n"

        done = False
        try:
            yield chunk({"role": "assistant", "content": ""})
            if mode == "malformed":
                yield "data: {this is not json\n\n"
                return
            if mode == "no_choices":
                yield 'data: {"id": "x"}\n\n'
                return
            pieces = [text[i : i + self.piece_chars] for i in range(0, len(text), self.piece_chars)]
            for i, piece in enumerate(pieces):
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                yield chunk({"content": piece})
                if i == 0 and mode == "hang_mid":
                    await asyncio.sleep(3600)
                if i == 0 and mode == "die_mid":
                    raise ConnectionAbortedError("the fake upstream died mid-stream")
            if isinstance(reply, dict):
                args = reply["arguments"]
                half = len(args) // 2
                call = {"index": 0, "id": "call_fake1", "type": "function"}
                yield chunk(
                    {"tool_calls": [{**call, "function": {"name": reply["name"], "arguments": args[:half]}}]}
                )
                yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[half:]}}]})
            yield chunk({}, finish)
            if (body.get("stream_options") or {}).get("include_usage"):
                yield f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"
            self._remember(self._scoped(body, prompt + f"<assistant>{json.dumps(text)}"))
            done = True
        finally:
            if not done and mode == "ok":
                self.streams_closed_early += 1
