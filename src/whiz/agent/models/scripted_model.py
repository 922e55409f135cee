"""A model that replays scripted replies: the fake the agent's tests (and demos) run against.

    model = ScriptedModel(["READ app.py", "app.py\n<<<<<<< SEARCH\n...", "Done."])

A reply is text, a `Reply` (text plus tool calls, optionally slow), a function of the request
that returns either (for replies that depend on what the agent sent), or an exception to raise
(the server going away).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from whiz.agent.models.seam import Finished, ModelEvent, ModelRequest, ModelText, ModelToolCall, output_items


@dataclass
class Reply:
    """One scripted reply. `calls` are (name, arguments) pairs; `delay_s` is per streamed chunk."""

    text: str = ""
    calls: Sequence[tuple[str, dict[str, Any] | str]] = ()
    delay_s: float = 0.0
    chunk_chars: int = 8


Script = str | Reply | BaseException | Callable[[ModelRequest], "str | Reply"]


@dataclass
class ScriptedModel:
    """Replays `replies` in order, one per call, and records every request it was sent."""

    replies: list[Script]
    requests: list[ModelRequest] = field(default_factory=list)
    cancels: int = 0
    context_window: int | None = None
    """The window the agent should fit in (None: none known); its usage counts 4 characters a token."""
    _cancelled: bool = False
    _calls: int = 0

    async def respond(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        self._cancelled = False
        if not self.replies:
            yield Finished("failed", error="the scripted model has no more replies")
            return
        script = self.replies.pop(0)
        if isinstance(script, BaseException):
            raise script
        reply = script(request) if callable(script) else script
        if isinstance(reply, str):
            reply = Reply(reply)
        sent = ""
        for start in range(0, len(reply.text), reply.chunk_chars):
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            if self._cancelled:
                yield Finished("cancelled", output_items(sent, []), self._usage(request, sent))
                return
            piece = reply.text[start : start + reply.chunk_chars]
            sent += piece
            yield ModelText(piece)
        calls = []
        for name, args in reply.calls:
            self._calls += 1
            text = args if isinstance(args, str) else json.dumps(args)
            call = ModelToolCall(f"call_{self._calls}", name, text)
            calls.append(call)
            yield call
        yield Finished("completed", output_items(sent, calls), self._usage(request, sent), _timings(sent))

    async def cancel(self) -> None:
        self.cancels += 1
        self._cancelled = True

    @staticmethod
    def _usage(request: ModelRequest, text: str) -> dict[str, Any]:
        # A rough count (4 characters a token), so usage totals are non-zero and plausible.
        prompt = len(request.instructions) + sum(len(json.dumps(i)) for i in request.items)
        return {
            "input_tokens": prompt // 4,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": len(text) // 4,
        }


def _timings(text: str) -> dict[str, Any]:
    return {"ttft_ms": 1.0, "decode_tokens": len(text) // 4, "decode_ms": 1.0 + len(text) / 40}
