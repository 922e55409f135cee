"""A `ModelClient` over Chat Completions: any OpenAI-compatible server (vLLM, SGLang, llama.cpp's
server, Ollama, a hosted API, or whiz itself), for the deep model when it lives upstream.

Chat Completions is stateless, so every call sends the whole conversation; the agent's Responses
items become chat messages here (`chat_messages`), which the healing step reuses.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from whiz.agent.models.seam import Finished, ModelEvent, ModelRequest, ModelText, ModelToolCall, output_items
from whiz.client import ClientError, HttpClient


def chat_messages(instructions: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as chat messages: a system message, then one message per turn."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": instructions}] if instructions else []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item.get("role", "user"), "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id", ""),
                "type": "function",
                "function": {"name": item.get("name", ""), "arguments": item.get("arguments", "")},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id", ""),
                    "content": _text(item.get("output")),
                }
            )
    return messages


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def chat_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Responses-style function tools ({type, name, parameters}) in the chat shape ({type, function})."""
    if not tools:
        return None
    return [
        {"type": "function", "function": {k: v for k, v in t.items() if k != "type"}}
        for t in tools
        if t.get("type") == "function"
    ]


def responses_usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Chat usage (prompt/completion tokens) under the Responses names the agent counts."""
    usage = usage or {}
    return {
        "input_tokens": usage.get("prompt_tokens", 0),
        "input_tokens_details": {
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        },
        "output_tokens": usage.get("completion_tokens", 0),
    }


class ChatModel:
    """Streams replies from `POST {base_url}/v1/chat/completions`. Close it when done."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        model: str | None = None,
        temperature: float = 0.0,
        http: HttpClient | None = None,
    ):
        self.http = http or HttpClient(base_url, api_key)
        self.model = model
        self.temperature = temperature
        self._cancelled = False
        self._running = False
        self.context_window: int | None = None
        """Tokens the upstream model holds, where its `/v1/models` says (set by whoever opens it)."""

    async def close(self) -> None:
        await self.http.close()

    async def respond(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        body: dict[str, Any] = {
            "messages": chat_messages(request.instructions, request.items),
            "temperature": self.temperature if request.temperature is None else request.temperature,
            "stream_options": {"include_usage": True},
        }
        if self.model:
            body["model"] = self.model
        if tools := chat_tools(request.tools):
            body["tools"] = tools
        if request.max_output_tokens:
            body["max_tokens"] = request.max_output_tokens
        if request.prediction:
            body["prediction"] = {"type": "content", "content": request.prediction}
        text, calls, finish, usage, timings = "", {}, None, {}, {}
        self._cancelled, self._running = False, True
        try:
            async for chunk in self.http.stream("/chat/completions", body):
                if self._cancelled:
                    break  # leaving the stream closes the connection, which stops the server
                if "error" in chunk and not chunk.get("choices"):
                    message = (chunk.get("error") or {}).get("message") or "the server sent an error"
                    yield Finished("failed", error=message)
                    return
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        text += delta["content"]
                        yield ModelText(delta["content"])
                    for call in delta.get("tool_calls") or []:
                        _merge_call(calls, call)
                    finish = choice.get("finish_reason") or finish
                usage = chunk.get("usage") or usage
                timings = chunk.get("whiz") or timings
        except ClientError as exc:
            yield Finished("failed", error=str(exc))
            return
        finally:
            self._running = False
        tool_calls = [
            ModelToolCall(c["id"] or f"call_{i}", c["name"], c["arguments"]) for i, c in calls.items()
        ]
        for call in tool_calls:
            yield call
        status = "incomplete" if finish == "length" else "completed"
        if self._cancelled:
            status = "cancelled"
        yield Finished(status, output_items(text, tool_calls), responses_usage(usage), timings)

    async def cancel(self) -> None:
        if self._running:
            self._cancelled = True


def _merge_call(calls: dict[int, dict[str, str]], delta: dict[str, Any]) -> None:
    """Tool calls stream in pieces keyed by index: the id and name first, the arguments in parts."""
    slot = calls.setdefault(delta.get("index", len(calls)), {"id": "", "name": "", "arguments": ""})
    slot["id"] = delta.get("id") or slot["id"]
    function = delta.get("function") or {}
    slot["name"] = function.get("name") or slot["name"]
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments)
    slot["arguments"] += arguments or ""
