"""POST /v1/messages (Anthropic's Messages API) through the anthropic SDK, over a real server on the
fake engine: what Claude Code and other Anthropic clients speak."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TOOL_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def weather_script(conversation: str) -> str:
    if "<tool_response>" in conversation:
        result = conversation.rsplit("<tool_response>\n", 1)[1].split("\n</tool_response>")[0]
        return f"The weather: {result}"
    return TOOL_CALL


@pytest.fixture
def claude():
    clients: list[anthropic.Anthropic] = []

    def make(served, api_key: str = "x") -> anthropic.Anthropic:
        client = anthropic.Anthropic(base_url=served.root, api_key=api_key, max_retries=0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def test_a_message_with_a_system_prompt_in_blocks_and_cache_hints(serve_fake, claude):
    client = claude(serve_fake())
    out = client.messages.create(
        model="local-coder",
        max_tokens=200,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "héllo"}]}],
        metadata={"user_id": "u1"},
    )
    assert out.type == "message" and out.role == "assistant" and out.model == "local-coder"
    assert [b.type for b in out.content] == ["text"] and out.content[0].text == "echo: héllo"
    assert out.stop_reason == "end_turn"
    assert out.usage.output_tokens == len("echo: héllo".encode())
    assert out.usage.input_tokens + out.usage.cache_read_input_tokens > 0


def test_a_tool_use_round_trip(serve_fake, claude):
    client = claude(serve_fake(script=weather_script))
    first = client.messages.create(
        model="m", max_tokens=200, tools=[WEATHER_TOOL], messages=[{"role": "user", "content": "Paris?"}]
    )
    assert first.stop_reason == "tool_use"
    [use] = [b for b in first.content if b.type == "tool_use"]
    assert use.name == "get_weather" and use.input == {"city": "Paris"} and use.id
    second = client.messages.create(
        model="m",
        max_tokens=200,
        tools=[WEATHER_TOOL],
        messages=[
            {"role": "user", "content": "Paris?"},
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]},
        ],
    )
    assert second.stop_reason == "end_turn" and second.content[0].text == "The weather: sunny"
    # The conversation so far was in the engine's cache: only the new message was prefilled.
    assert second.usage.cache_read_input_tokens > 0


def test_a_streamed_reply_has_every_event_in_order(serve_fake, claude):
    client = claude(serve_fake(script=lambda c: "Let me look.\n" + TOOL_CALL))
    with client.messages.stream(
        model="m", max_tokens=200, tools=[WEATHER_TOOL], messages=[{"role": "user", "content": "Paris?"}]
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_start" in kinds and "content_block_delta" in kinds and "message_delta" in kinds
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[0].text.strip() == "Let me look." and final.content[1].input == {"city": "Paris"}
    assert final.stop_reason == "tool_use" and final.usage.output_tokens > 0


def test_count_tokens(serve_fake, claude):
    client = claude(serve_fake())
    short = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hi"}])
    longer = client.messages.count_tokens(
        model="m", tools=[WEATHER_TOOL], messages=[{"role": "user", "content": "hi " * 100}]
    )
    assert 0 < short.input_tokens < longer.input_tokens


def test_errors_are_anthropic_shaped_and_the_key_is_x_api_key(serve_fake, claude):
    served = serve_fake(api_keys=["k1"])
    with pytest.raises(anthropic.AuthenticationError):
        claude(served, api_key="wrong").messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    ok = claude(served, api_key="k1").messages.create(
        model="m", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )
    assert ok.content[0].text == "echo: hi"
    bad = httpx.post(
        f"{served.root}/v1/messages",
        headers={"x-api-key": "k1"},
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},  # no max_tokens
    )
    assert bad.status_code == 400
    body = bad.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in body["error"]["message"]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    refused = httpx.post(
        f"{served.root}/v1/messages",
        headers={"x-api-key": "k1"},
        json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [image]}]},
    )
    assert refused.status_code == 400 and "text only" in refused.json()["error"]["message"]


def test_host_and_origin_refusals_are_anthropic_shaped_on_its_routes(serve_fake, claude):
    # An Anthropic client reads `error.type` and `error.message`; an OpenAI-shaped body leaves it
    # with no message to show for why it was refused.
    served = serve_fake(allowed_hosts=["box.lan"])
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    refusals = [
        httpx.post(f"{served.root}/v1/messages", json=body, headers={"Host": "rebind.evil"}),
        httpx.post(f"{served.root}/v1/messages", json=body, headers={"Origin": "https://evil.example"}),
        httpx.post(
            f"{served.root}/v1/messages/count_tokens", json=body, headers={"Origin": "https://evil.example"}
        ),
    ]
    for r in refusals:
        assert r.status_code == 403, r.text
        assert r.json()["type"] == "error", r.json()
        assert r.json()["error"]["type"] == "permission_error" and r.json()["error"]["message"]
    wrong_method = httpx.get(f"{served.root}/v1/messages")
    assert wrong_method.status_code == 405 and wrong_method.json()["type"] == "error"
    assert claude(served).messages.create(**{**body, "max_tokens": 50}).content[0].text == "echo: hi"


def test_replies_carry_the_servers_timings_as_on_the_openai_apis(serve_fake):
    # `whiz bench serve` compares this API's time to first token with Chat Completions' from the
    # server's own figures; Anthropic clients ignore the extra key (the SDK test above streams it).
    served = serve_fake()
    body = {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
    whole = httpx.post(f"{served.root}/v1/messages", json=body, timeout=30).json()
    assert whole["whiz"]["ttft_ms"] > 0 and whole["whiz"]["decode_tokens"] > 0
    with httpx.stream("POST", f"{served.root}/v1/messages", json={**body, "stream": True}, timeout=30) as r:
        events = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
    [last] = [e for e in events if e["type"] == "message_delta"]
    assert last["whiz"]["ttft_ms"] > 0 and last["usage"]["output_tokens"] > 0
