"""POST/GET /v1/responses through the openai SDK: events, chaining, tools, warm-up."""

import json

import httpx
import pytest
from openai import BadRequestError

from .test_chat import TOOL_CALL, weather_script

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def count_turns(conversation: str) -> str:
    return f"turns={conversation.count('<|im_start|>user')} last={conversation.rsplit(chr(10), 2)[-2]}"


def test_create_returns_text_usage_and_timings(serve_fake, sdk):
    client = sdk(serve_fake())
    resp = client.responses.create(model="fake", input="hello there", instructions="Be brief.")
    assert resp.status == "completed"
    assert resp.output_text == "echo: hello there"
    assert resp.id.startswith("resp_")
    [item] = resp.output
    assert item.type == "message" and item.role == "assistant" and item.status == "completed"
    assert resp.usage.output_tokens == len("echo: hello there")
    assert resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens
    assert resp.instructions == "Be brief."
    whiz = resp.model_extra["whiz"]
    assert whiz["decode_tokens"] == resp.usage.output_tokens
    assert whiz["ttft_ms"] > 0


def test_streaming_events_in_order_with_sequence_numbers(serve_fake, sdk):
    client = sdk(serve_fake())
    events = list(client.responses.create(model="fake", input="hi", stream=True))
    types = [e.type for e in events]
    n_deltas = types.count("response.output_text.delta")
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * n_deltas,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert n_deltas >= 1
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "echo: hi"
    assert events[-2].item.content[0].text == text
    done = events[-1].response
    assert done.status == "completed" and done.output_text == text
    assert events[0].response.id == done.id and events[0].response.status == "in_progress"


def test_previous_response_id_chains_with_cache_and_history(serve_fake, sdk):
    client = sdk(serve_fake(script=count_turns))
    first = client.responses.create(model="fake", input="one", instructions="Count.")
    assert first.output_text == "turns=1 last=one<|im_end|>"
    second = client.responses.create(model="fake", input="two", previous_response_id=first.id)
    assert second.output_text == "turns=2 last=two<|im_end|>"
    assert second.previous_response_id == first.id
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens
    third = client.responses.create(model="fake", input="three", previous_response_id=second.id)
    assert third.output_text.startswith("turns=3")


def test_function_tool_call_and_output_round_trip(serve_fake, sdk):
    client = sdk(serve_fake(script=weather_script))
    first = client.responses.create(model="fake", input="Weather in Paris?", tools=[WEATHER_TOOL])
    assert first.status == "completed"
    [call] = first.output
    assert call.type == "function_call"
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id.startswith("call_") and call.status == "completed"

    second = client.responses.create(
        model="fake",
        previous_response_id=first.id,
        tools=[WEATHER_TOOL],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
    )
    assert second.output_text == "The weather: sunny"
    assert second.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens


def test_function_call_output_with_full_input_reaches_the_model(serve_fake, sdk):
    client = sdk(serve_fake(script=weather_script))
    resp = client.responses.create(
        model="fake",
        tools=[WEATHER_TOOL],
        input=[
            {"type": "message", "role": "user", "content": "Weather?"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Oslo"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
        ],
    )
    assert resp.output_text == "The weather: rain"


def test_streamed_function_call_events(serve_fake, sdk):
    client = sdk(serve_fake(script=weather_script))
    events = list(client.responses.create(model="fake", input="w?", tools=[WEATHER_TOOL], stream=True))
    types = [e.type for e in events]
    assert types == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert json.loads(events[4].arguments) == {"city": "Paris"}
    assert events[5].item.type == "function_call" and events[5].item.name == "get_weather"
    assert events[2].item.id == events[5].item.id == events[3].item_id


def test_get_returns_the_stored_response(serve_fake, sdk):
    served = serve_fake()
    client = sdk(served)
    resp = client.responses.create(model="fake", input="keep me")
    got = client.responses.retrieve(resp.id)
    assert got.id == resp.id and got.output_text == "echo: keep me" and got.status == "completed"
    missing = httpx.get(f"{served.base_url}/responses/resp_nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_store_false_is_not_kept(serve_fake, sdk):
    served = serve_fake()
    resp = sdk(served).responses.create(model="fake", input="forget me", store=False)
    assert httpx.get(f"{served.base_url}/responses/{resp.id}").status_code == 404


def test_unknown_previous_response_id_is_a_400(serve_fake, sdk):
    client = sdk(serve_fake())
    with pytest.raises(BadRequestError) as info:
        client.responses.create(model="fake", input="x", previous_response_id="resp_missing")
    err = info.value.body
    assert err["code"] == "previous_response_not_found"
    assert err["param"] == "previous_response_id"
    assert client.responses.create(model="fake", input="still ok").output_text == "echo: still ok"


def test_generate_false_warms_up_then_a_turn_chains_from_it(serve_fake, sdk):
    served = serve_fake(script=count_turns)
    client = sdk(served)
    warm = client.responses.create(
        model="fake",
        input=[{"type": "message", "role": "developer", "content": "You are a coding agent. " * 20}],
        tools=[WEATHER_TOOL],
        extra_body={"generate": False},
    )
    assert warm.status == "completed"
    assert warm.output == []
    assert warm.usage.output_tokens == 0
    assert warm.usage.input_tokens > 100
    turn = client.responses.create(
        model="fake", input="go", previous_response_id=warm.id, tools=[WEATHER_TOOL]
    )
    assert turn.output_text == "turns=1 last=go<|im_end|>"
    assert turn.usage.input_tokens_details.cached_tokens >= warm.usage.input_tokens


def test_text_then_call_gives_a_message_item_then_a_function_call(serve_fake, sdk):
    served = serve_fake(
        script=lambda conv: "Let me check.\n" + TOOL_CALL if "<tool_response>" not in conv else "ok"
    )
    client = sdk(served)
    first = client.responses.create(model="fake", input="w?", tools=[WEATHER_TOOL])
    assert [item.type for item in first.output] == ["message", "function_call"]
    assert first.output_text.strip() == "Let me check."
    call = first.output[1]
    second = client.responses.create(
        model="fake",
        previous_response_id=first.id,
        tools=[WEATHER_TOOL],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sun"}],
    )
    assert second.output_text == "ok"
    assert (
        second.usage.input_tokens_details.cached_tokens
        >= first.usage.input_tokens + first.usage.output_tokens
    )


def test_truncation_auto_drops_the_oldest_items_of_a_chain_that_outgrew_the_window(serve_fake, sdk):
    # The fake engine counts a byte as a token: a 4096-token window holds a few of these turns.
    client = sdk(serve_fake(engine_kw={"n_ctx": 4096}))
    long = "x" * 900
    previous = None
    for i in range(6):
        out = client.responses.create(
            model="fake", input=f"turn {i} {long}", previous_response_id=previous, truncation="auto",
            max_output_tokens=64,
        )  # fmt: skip
        assert out.status in ("completed", "incomplete")
        previous = out.id
    assert out.output_text.startswith("echo: turn 5")
    # Without it, the same chain is refused with the reason, as OpenAI's API does.
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(model="fake", input=f"turn 6 {long}", previous_response_id=previous)
    assert refused.value.body["code"] == "context_length_exceeded"
