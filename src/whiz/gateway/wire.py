"""Translating between whiz's turns and OpenAI's chat completions, the upstreams' one protocol.

`chat_messages` renders a conversation for an upstream (which applies its own chat template);
`ChunkReader` reads the upstream's `chat.completion.chunk` stream back into text deltas, tool
calls and usage. Tool calls arrive either as OpenAI's structured `tool_calls` deltas (vLLM with a
tool parser, llama-server with --jinja) or as Qwen's `<tool_call>` text (an upstream without one);
both become the same `ToolCall`.
"""

from __future__ import annotations

import json
from typing import Any

from whiz.backend.types import TextDelta
from whiz.chat.messages import Message, ToolCall
from whiz.chat.toolcalls import TextPart, ToolCallParser, new_call_id
from whiz.engine.types import GenerationStats
from whiz.gateway.errors import UpstreamProtocolError


def chat_message(m: Message) -> dict[str, Any]:
    if m.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": m.content or (None if m.tool_calls else "")}
        if m.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls
            ]
        return out
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    return {"role": m.role, "content": m.content}


def chat_messages(system: str | None, messages: list[Message]) -> list[dict[str, Any]]:
    head = [{"role": "system", "content": system}] if system is not None else []
    return head + [chat_message(m) for m in messages]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class ChunkReader:
    """Feed the chunks of one streamed chat completion; read pieces, then the totals."""

    def __init__(self, replica: str, *, parse_tools: bool):
        self.replica = replica
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.whiz: dict[str, Any] = {}
        self.llama_timings: dict[str, Any] = {}
        self.chunks = 0
        self._parser = ToolCallParser(enabled=parse_tools)
        self._calls: dict[int, dict[str, str]] = {}

    def feed(self, chunk: dict[str, Any]) -> list[TextDelta | ToolCall]:
        """The text and tool calls that one chunk completes (tool calls come at `finish`)."""
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise UpstreamProtocolError(
                f"Upstream {self.replica} sent a chunk without choices: {str(chunk)[:200]}"
            )
        self.chunks += 1
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("whiz"), dict):
            self.whiz = chunk["whiz"]
        if isinstance(chunk.get("timings"), dict):  # llama-server's own counters
            self.llama_timings = chunk["timings"]
        out: list[TextDelta | ToolCall] = []
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # whiz asks for one choice; ignore anything else
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                delta = {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                out += self._pieces(self._parser.feed(content))
            for call in delta.get("tool_calls") or []:
                self._add_call(call)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return out

    def finish(self) -> list[TextDelta | ToolCall]:
        """What is left at the end of the stream: held-back text, then the structured tool calls."""
        out = self._pieces(self._parser.finish())
        for _, call in sorted(self._calls.items()):
            if call["name"]:
                out.append(ToolCall(call["id"] or new_call_id(), call["name"], call["arguments"]))
        self._calls.clear()
        return out

    @staticmethod
    def _pieces(parts: list[TextPart | ToolCall]) -> list[TextDelta | ToolCall]:
        return [
            p if isinstance(p, ToolCall) else TextDelta(p.text)
            for p in parts
            if isinstance(p, ToolCall) or p.text
        ]

    def _add_call(self, call: Any) -> None:
        if not isinstance(call, dict):
            raise UpstreamProtocolError(
                f"Upstream {self.replica} sent a malformed tool call: {str(call)[:200]}"
            )
        index = _int(call.get("index"))
        entry = self._calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        if isinstance(call.get("id"), str) and call["id"]:
            entry["id"] = call["id"]
        fn = call.get("function") if isinstance(call.get("function"), dict) else {}
        if isinstance(fn.get("name"), str):
            entry["name"] += fn["name"]
        if isinstance(fn.get("arguments"), str):
            entry["arguments"] += fn["arguments"]
        elif isinstance(fn.get("arguments"), dict):  # some servers send the object itself
            entry["arguments"] += json.dumps(fn["arguments"], ensure_ascii=False)

    def stats(self, *, ttft_ms: float, decode_ms: float, pieces: int) -> GenerationStats:
        """The turn's counts and timings: the upstream's usage, the gateway's own clock."""
        usage = self.usage
        prompt = _int(usage.get("prompt_tokens"))
        details = (
            usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
        )
        cached = _int(details.get("cached_tokens")) or _int(self.llama_timings.get("cache_n"))
        out_details = (
            usage.get("completion_tokens_details")
            if isinstance(usage.get("completion_tokens_details"), dict)
            else {}
        )
        # Without usage (an upstream that ignores stream_options) the deltas are the best count.
        completion = _int(usage.get("completion_tokens")) if usage else pieces
        return GenerationStats(
            prompt_tokens=prompt,
            cached_tokens=min(cached, prompt) if prompt else cached,
            prefill_tokens=max(prompt - cached, 0),
            prefill_ms=float(self.whiz.get("prefill_ms") or ttft_ms),
            ttft_ms=ttft_ms,
            decode_tokens=completion,
            decode_ms=decode_ms,
            draft_accepted=_int(out_details.get("accepted_prediction_tokens")),
            draft_rejected=_int(out_details.get("rejected_prediction_tokens")),
            replica=self.replica,
        )
