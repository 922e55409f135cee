"""One finished turn as the client saw it: the final response plus client-side timings.

The server's own timings (the `whiz` object) are more precise than anything a client can measure,
so they are kept as sent; the client's wall-clock numbers are there for servers that don't send them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

TERMINAL_EVENTS = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})


@dataclass
class Exchange:
    """A request's outcome. `response` is the Responses API object (or the last chat chunk's data)."""

    started_at: float = field(default_factory=time.perf_counter)
    response: dict[str, Any] | None = None
    text: str = ""
    events: int = 0
    first_delta_at: float | None = None
    finished_at: float | None = None

    def observe(self, event: dict[str, Any]) -> None:
        """Record one Responses streaming event."""
        now = time.perf_counter()
        self.events += 1
        kind = event.get("type", "")
        if kind.endswith(".delta") and self.first_delta_at is None:
            self.first_delta_at = now
        if kind == "response.output_text.delta":
            self.text += event.get("delta", "")
        if kind in TERMINAL_EVENTS:
            self.finished_at = now
            if isinstance(event.get("response"), dict):
                self.response = event["response"]

    def observe_chunk(self, chunk: dict[str, Any]) -> None:
        """Record one `chat.completion.chunk`; the last one carries `usage` and `whiz`."""
        now = time.perf_counter()
        self.events += 1
        response = self.response if self.response is not None else {"id": chunk.get("id"), "status": None}
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if self.first_delta_at is None and (
                delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls")
            ):
                self.first_delta_at = now
            self.text += delta.get("content") or ""
            if choice.get("finish_reason"):
                response["status"] = choice["finish_reason"]
        for key in ("usage", "whiz"):
            if chunk.get(key):
                response[key] = chunk[key]
        self.response = response
        self.finished_at = now

    def observe_message_event(self, event: dict[str, Any]) -> None:
        """Record one Anthropic Messages streaming event; `message_delta` carries the stop reason,
        the usage and (from whiz) `whiz`."""
        now = time.perf_counter()
        self.events += 1
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.response = {"id": message.get("id"), "status": None, "usage": message.get("usage") or {}}
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if self.first_delta_at is None:
                self.first_delta_at = now
            self.text += delta.get("text") or ""
        elif kind == "message_delta":
            response = self.response if self.response is not None else {"id": None}
            response["status"] = (event.get("delta") or {}).get("stop_reason")
            response["usage"] = {**(response.get("usage") or {}), **(event.get("usage") or {})}
            if event.get("whiz"):
                response["whiz"] = event["whiz"]
            self.response = response
        elif kind == "message_stop":
            self.finished_at = now

    @property
    def id(self) -> str | None:
        return (self.response or {}).get("id")

    @property
    def status(self) -> str | None:
        return (self.response or {}).get("status")

    @property
    def usage(self) -> dict[str, Any]:
        return (self.response or {}).get("usage") or {}

    @property
    def whiz(self) -> dict[str, Any]:
        """The server's timings (`ttft_ms`, `prefill_ms`, `tokens_per_s`, ...); empty if not sent."""
        return (self.response or {}).get("whiz") or {}

    @property
    def input_tokens(self) -> int | None:
        if "cache_read_input_tokens" in self.usage:  # Anthropic's input_tokens leaves the cached out
            return (self.usage.get("input_tokens") or 0) + (self.usage["cache_read_input_tokens"] or 0)
        return self.usage.get("input_tokens", self.usage.get("prompt_tokens"))

    @property
    def cached_tokens(self) -> int | None:
        details = self.usage.get("input_tokens_details") or self.usage.get("prompt_tokens_details") or {}
        return details.get("cached_tokens", self.usage.get("cache_read_input_tokens"))

    @property
    def output_tokens(self) -> int | None:
        return self.usage.get("output_tokens", self.usage.get("completion_tokens"))

    @property
    def total_ms(self) -> float:
        """Wall time from sending the request to its terminal event (or to now, if unfinished)."""
        end = self.finished_at if self.finished_at is not None else time.perf_counter()
        return (end - self.started_at) * 1000

    @property
    def client_ttft_ms(self) -> float:
        """Wall time to the first streamed delta; the whole turn if nothing was streamed."""
        if self.first_delta_at is None:
            return self.total_ms
        return (self.first_delta_at - self.started_at) * 1000

    @property
    def ttft_ms(self) -> float:
        """The server-reported TTFT when there is one, else the client's."""
        server = self.whiz.get("ttft_ms")
        return float(server) if server is not None else self.client_ttft_ms

    @property
    def ttft_source(self) -> str:
        return "server" if self.whiz.get("ttft_ms") is not None else "client"
