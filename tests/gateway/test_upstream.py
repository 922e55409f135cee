"""whiz's full API on top of one OpenAI-compatible upstream (a fake one, on a real socket)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from whiz.client import HttpClient, ResponseError, ResponsesSocket, user_message

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CHAT_TOOL = {"type": "function", "function": {k: v for k, v in TOOL.items() if k != "type"}}


async def test_chat_completion_streamed_and_not_give_the_same_text_with_upstream_usage(upstreams, gateway):
    up = upstreams()
    gw = gateway([up.url])
    body = {"model": "m", "messages": [{"role": "user", "content": "hello wörld"}]}
    async with HttpClient(gw.root) as client:
        whole = await client.post("/chat/completions", body)
        streamed = await client.chat_turn(body)
    assert whole["choices"][0]["message"]["content"] == "echo: hello wörld"
    assert streamed.text == "echo: hello wörld"
    assert whole["usage"]["prompt_tokens"] > 0
    assert whole["whiz"]["replica"] == up.url
    # The gateway asks the upstream for its own model, whatever name the client used.
    assert up.fake.bodies[0]["model"] == "fake-model"
    assert up.fake.bodies[0]["stream"] is True


async def test_websocket_turns_resend_the_whole_history_and_hit_the_upstream_cache(upstreams, gateway):
    up = upstreams()
    gw = gateway([up.url])
    async with ResponsesSocket.connect(gw.root) as sock:
        first = await sock.run(model="m", instructions="Be brief.", input="one")
        second = await sock.run(model="m", input=[user_message("two")], previous_response_id=first.id)
    assert first.text == "echo: one" and second.text == "echo: two"
    sent = up.fake.bodies[-1]["messages"]
    assert sent == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "echo: one"},
        {"role": "user", "content": "two"},
    ]
    assert second.cached_tokens > 0 and second.cached_tokens < second.input_tokens


async def test_http_responses_chain_keeps_the_conversation(upstreams, gateway):
    up = upstreams()
    gw = gateway([up.url])
    async with HttpClient(gw.root) as client:
        first = await client.responses_turn({"input": "alpha"})
        second = await client.responses_turn({"input": "beta", "previous_response_id": first.id})
    assert second.text == "echo: beta"
    assert [m["content"] for m in up.fake.bodies[-1]["messages"]] == ["alpha", "echo: alpha", "beta"]


async def test_tool_calls_pass_through_both_ways(upstreams, gateway):
    up = upstreams()
    gw = gateway([up.url])
    async with ResponsesSocket.connect(gw.root) as sock:
        turn = await sock.run(model="m", input='call get_weather {"city": "Paris"}', tools=[TOOL])
        [call] = [item for item in turn.response["output"] if item["type"] == "function_call"]
        assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Paris"}
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
        after = await sock.run(model="m", input=[output], tools=[TOOL], previous_response_id=turn.id)
    assert after.text == "tool said: sunny"
    sent = up.fake.bodies[-1]
    assert sent["tools"][0]["function"]["name"] == "get_weather"
    assistant, tool = sent["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == call["call_id"]
    assert tool == {"role": "tool", "tool_call_id": call["call_id"], "content": "sunny"}
    # Chat completions: the same call comes back as OpenAI's tool_calls.
    async with HttpClient(gw.root) as client:
        out = await client.post(
            "/chat/completions",
            {"messages": [{"role": "user", "content": "call get_weather {}"}], "tools": [CHAT_TOOL]},
        )
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    assert out["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


async def test_qwen_tool_call_text_from_an_upstream_without_a_tool_parser_becomes_a_call(upstreams, gateway):
    raw = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    up = upstreams(script=lambda messages: raw)
    gw = gateway([up.url])
    async with HttpClient(gw.root) as client:
        out = await client.post(
            "/chat/completions", {"messages": [{"role": "user", "content": "w?"}], "tools": [CHAT_TOOL]}
        )
    [call] = out["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Oslo"}


@pytest.mark.parametrize(("owned_by", "forwarded"), [("whiz", True), ("vllm", False), ("llamacpp", False)])
async def test_prediction_cache_key_and_whiz_options_go_only_to_upstreams_that_honour_them(
    upstreams, gateway, owned_by, forwarded
):
    up = upstreams(owned_by=owned_by)
    gw = gateway([up.url])
    body = {
        "messages": [{"role": "user", "content": "edit"}],
        "prediction": {"type": "content", "content": "def f(): pass"},
        "prompt_cache_key": "agent-7",
        "whiz": {"speculation": False, "tool_grammar": False},
    }
    async with HttpClient(gw.root) as client:
        out = await client.post("/chat/completions", body)
    assert out["choices"][0]["message"]["content"] == "echo: edit"
    sent = up.fake.bodies[-1]
    assert ("prediction" in sent) is forwarded
    assert (sent.get("prompt_cache_key") == "agent-7") is forwarded
    assert (sent.get("whiz") == {"speculation": False, "tool_grammar": False}) is forwarded


async def test_websocket_session_id_reaches_a_whiz_upstream_as_its_cache_key(upstreams, gateway):
    up = upstreams(owned_by="whiz")
    gw = gateway([up.url])
    async with ResponsesSocket.connect(gw.root, headers={"x-session-id": "codex-42"}) as sock:
        await sock.run(model="m", input="hi")
    assert up.fake.bodies[-1]["prompt_cache_key"] == "codex-42"


async def test_warm_up_prefills_the_upstream_and_answers_at_once(upstreams, gateway):
    up = upstreams()
    gw = gateway([up.url])
    async with ResponsesSocket.connect(gw.root) as sock:
        warm = await sock.run(model="m", instructions="Sys.", input="context", generate=False)
        turn = await sock.run(model="m", input=[user_message("go")], previous_response_id=warm.id)
    assert warm.status == "completed" and warm.text == ""
    assert up.fake.bodies[0]["max_tokens"] == 1  # the warm-up only loads the prompt
    assert turn.text == "echo: go" and turn.cached_tokens > 0


async def test_cancel_closes_the_upstream_stream(upstreams, gateway):
    up = upstreams(script=lambda m: "x" * 400, delay_s=0.02)
    gw = gateway([up.url])
    async with ResponsesSocket.connect(gw.root) as sock:
        seen = 0
        async for event in sock.create(model="m", input="long"):
            if event["type"] == "response.output_text.delta":
                seen += 1
                if seen == 3:
                    await sock.cancel()
        assert sock.last.status == "cancelled"
        assert len(sock.last.text) < 400
        # The session goes on (a cancelled response cannot be continued: the client starts anew).
        after = await sock.run(model="m", input=[user_message("next")])
    assert after.text.startswith("x")  # the script ignores input; the point is that it ran
    await _until(lambda: up.fake.streams_closed_early == 1)


async def test_a_client_leaving_a_streamed_chat_closes_the_upstream_stream(upstreams, gateway):
    up = upstreams(script=lambda m: "y" * 400, delay_s=0.02)
    gw = gateway([up.url])
    body = {"messages": [{"role": "user", "content": "long"}], "stream": True}
    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", gw.base_url + "/chat/completions", json=body) as r,
    ):
        async for line in r.aiter_lines():
            if '"content": "y' in line:
                break
    await _until(lambda: up.fake.streams_closed_early == 1)


async def _until(predicate, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    assert predicate()


async def test_n_candidates_are_n_requests_to_the_sessions_replica(upstreams, gateway):
    a, b = upstreams(), upstreams()
    gw = gateway([a.url, b.url])
    body = {"messages": [{"role": "user", "content": "twice"}], "n": 2}
    async with HttpClient(gw.root) as client:
        out = await client.post("/chat/completions", body)
    assert [c["message"]["content"] for c in out["choices"]] == ["echo: twice"] * 2
    assert sorted([len(a.fake.bodies), len(b.fake.bodies)]) == [0, 2]  # both on one replica


@pytest.mark.parametrize(("owned_by", "continues"), [("whiz", True), ("vllm", True), ("llamacpp", False)])
async def test_a_reply_begun_by_the_client_goes_only_to_upstreams_that_continue_it(
    upstreams, gateway, owned_by, continues
):
    up = upstreams(owned_by=owned_by)
    gw = gateway([up.url])
    body = {
        "messages": [{"role": "user", "content": "edit"}, {"role": "assistant", "content": "```python\n"}],
        "continue_final_message": True,
    }
    async with HttpClient(gw.root) as client:
        if not continues:
            # Another server may answer afresh, and the reply would say it continued: refused.
            with pytest.raises(ResponseError) as err:
                await client.post("/chat/completions", body)
            assert err.value.status == 400 and err.value.param == "continue_final_message"
            assert up.fake.bodies == [] or "continue_final_message" not in up.fake.bodies[-1]
            return
        await client.post("/chat/completions", body)
    sent = up.fake.bodies[-1]
    assert sent["continue_final_message"] is True and sent["messages"][-1]["role"] == "assistant"
    assert ("add_generation_prompt" in sent) is (owned_by == "vllm")
