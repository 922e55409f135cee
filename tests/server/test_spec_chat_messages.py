"""Chat Completions and Anthropic Messages replies carry every field their public schemas require
(OpenAI's `CreateChatCompletionResponse` and its chunk; Anthropic's `Message`, its `Usage` and
the streamed events), written out here by hand, streamed and not, text and tool calls."""

import json

import httpx

from .spec_shapes import NULL, fields
from .test_chat import WEATHER_TOOL as CHAT_WEATHER
from .test_chat import weather_script

CHAT = {
    "id": str,
    "object": str,
    "created": int,
    "model": str,
    "choices": list,
    "usage": dict,
    "system_fingerprint": str,
}
CHAT_CHOICE = {"index": int, "message": dict, "finish_reason": str, "logprobs": NULL}
CHAT_MESSAGE = {"role": str, "content": (str, NULL), "refusal": (str, NULL)}
CHAT_TOOL_CALL = {"id": str, "type": str, "function": dict}
CHAT_USAGE = {"prompt_tokens": int, "completion_tokens": int, "total_tokens": int}
CHUNK = {"id": str, "object": str, "created": int, "model": str, "choices": list, "system_fingerprint": str}
CHUNK_CHOICE = {"index": int, "delta": dict, "finish_reason": (str, NULL)}

MESSAGE = {
    "id": str,
    "type": str,
    "role": str,
    "content": list,
    "model": str,
    "stop_reason": (str, NULL),
    "stop_sequence": (str, NULL),
    "usage": dict,
}
USAGE = {
    "input_tokens": int,
    "output_tokens": int,
    "cache_creation_input_tokens": (int, NULL),
    "cache_read_input_tokens": (int, NULL),
    "cache_creation": (dict, NULL),
    "server_tool_use": (dict, NULL),
    "service_tier": (str, NULL),
}
BLOCKS = {
    "text": {"type": str, "text": str},
    "tool_use": {"type": str, "id": str, "name": str, "input": dict},
}
EVENTS = {
    "message_start": {"type": str, "message": dict},
    "content_block_start": {"type": str, "index": int, "content_block": dict},
    "content_block_delta": {"type": str, "index": int, "delta": dict},
    "content_block_stop": {"type": str, "index": int},
    "message_delta": {"type": str, "delta": dict, "usage": dict},
    "message_stop": {"type": str},
    "ping": {"type": str},
}
MESSAGES_WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def chat_problems(body: dict) -> list[str]:
    out = fields(body, CHAT, "completion") + fields(body.get("usage"), CHAT_USAGE, "usage")
    for i, choice in enumerate(body.get("choices") or []):
        out += fields(choice, CHAT_CHOICE, f"choices.{i}")
        out += fields(choice.get("message"), CHAT_MESSAGE, f"choices.{i}.message")
        for j, call in enumerate(choice["message"].get("tool_calls") or []):
            out += fields(call, CHAT_TOOL_CALL, f"choices.{i}.message.tool_calls.{j}")
            out += fields(call["function"], {"name": str, "arguments": str}, f"tool_calls.{j}.function")
    return out


def message_problems(msg: dict, where: str = "message") -> list[str]:
    out = fields(msg, MESSAGE, where) + fields(msg.get("usage"), USAGE, f"{where}.usage")
    for i, block in enumerate(msg.get("content") or []):
        out += fields(block, BLOCKS.get(block.get("type"), {"type": str}), f"{where}.content.{i}")
    return out


def sse_data(r: httpx.Response) -> list[dict]:
    return [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]


def chat(served, **body) -> httpx.Response:
    return httpx.post(f"{served.base_url}/chat/completions", json={"model": "fake", **body})


def messages(served, **body) -> httpx.Response:
    body = {"model": "fake", "max_tokens": 100, **body}
    return httpx.post(f"{served.base_url}/messages", json=body, headers={"anthropic-version": "2023-06-01"})


def test_a_chat_completion_has_every_required_field(serve_fake):
    served = serve_fake(script=weather_script)
    text = chat(served, messages=[{"role": "user", "content": "hi"}]).json()
    calls = chat(served, messages=[{"role": "user", "content": "weather?"}], tools=[CHAT_WEATHER]).json()
    assert chat_problems(text) == [] and chat_problems(calls) == []
    assert text["object"] == "chat.completion" and calls["choices"][0]["finish_reason"] == "tool_calls"
    assert text["system_fingerprint"].startswith("fp_whiz_")


def test_every_chat_chunk_has_its_required_fields(serve_fake):
    served = serve_fake(script=weather_script)
    for body in (
        {"messages": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "weather?"}], "tools": [CHAT_WEATHER]},
    ):
        chunks = sse_data(chat(served, stream=True, stream_options={"include_usage": True}, **body))
        *deltas, last = chunks
        problems = [p for c in deltas for p in fields(c, CHUNK, "chunk")]
        problems += [
            p for c in deltas for ch in c["choices"] for p in fields(ch, CHUNK_CHOICE, "chunk.choice")
        ]
        problems += fields(last, CHUNK, "last") + fields(last["usage"], CHAT_USAGE, "last.usage")
        assert problems == []
        assert {c["object"] for c in chunks} == {"chat.completion.chunk"}


def test_an_anthropic_message_has_every_required_field(serve_fake):
    served = serve_fake(script=weather_script)
    text = messages(served, messages=[{"role": "user", "content": "hi"}]).json()
    calls = messages(
        served, messages=[{"role": "user", "content": "weather?"}], tools=[MESSAGES_WEATHER]
    ).json()
    assert message_problems(text) == [] and message_problems(calls) == []
    assert text["stop_reason"] == "end_turn" and calls["stop_reason"] == "tool_use"
    assert calls["content"][-1]["input"] == {"city": "Paris"}


def test_every_anthropic_stream_event_has_its_required_fields(serve_fake):
    served = serve_fake(script=weather_script)
    for body in (
        {"messages": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "weather?"}], "tools": [MESSAGES_WEATHER]},
    ):
        events = sse_data(messages(served, stream=True, **body))
        assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
        problems = [
            p for ev in events for p in fields(ev, EVENTS.get(ev["type"], {"known": str}), ev["type"])
        ]
        problems += message_problems(events[0]["message"], "message_start.message")
        [delta] = [ev for ev in events if ev["type"] == "message_delta"]
        problems += fields(
            delta["delta"], {"stop_reason": str, "stop_sequence": (str, NULL)}, "message_delta.delta"
        )
        problems += fields(delta["usage"], {"output_tokens": int}, "message_delta.usage")
        assert problems == []
