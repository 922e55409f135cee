"""POST /v1/chat/completions through the openai SDK, over a real server on the fake engine."""

import json

import openai
import pytest

TOOL_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIMING_KEYS = {"ttft_ms", "prefill_tokens", "prefill_ms", "decode_tokens", "decode_ms", "tokens_per_s"}


def weather_script(conversation: str) -> str:
    if "<tool_response>" in conversation:
        result = conversation.rsplit("<tool_response>\n", 1)[1].split("\n</tool_response>")[0]
        return f"The weather: {result}"
    return TOOL_CALL


def test_completion_text_usage_and_timings(serve_fake, sdk):
    client = sdk(serve_fake())
    out = client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "héllo wörld"}])
    choice = out.choices[0]
    assert choice.message.content == "echo: héllo wörld"
    assert choice.finish_reason == "stop"
    assert out.object == "chat.completion"
    assert out.usage.completion_tokens == len("echo: héllo wörld".encode())
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens
    whiz = out.model_extra["whiz"]
    assert whiz.keys() >= TIMING_KEYS
    assert whiz["decode_tokens"] == out.usage.completion_tokens


def test_streamed_deltas_join_to_the_same_text_with_usage_chunk(serve_fake, sdk):
    client = sdk(serve_fake())
    messages = [{"role": "user", "content": "stream me 世界"}]
    full = client.chat.completions.create(model="fake", messages=messages).choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model="fake", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full == "echo: stream me 世界"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == []
    assert usage_chunk.usage.completion_tokens == len(full.encode())
    assert usage_chunk.model_extra["whiz"].keys() >= TIMING_KEYS
    last_choice_chunk = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    assert last_choice_chunk.model_extra["whiz"].keys() >= TIMING_KEYS


def test_stream_without_include_usage_has_no_usage_chunk(serve_fake, sdk):
    client = sdk(serve_fake())
    chunks = list(
        client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "a"}], stream=True)
    )
    assert all(c.choices for c in chunks)
    assert all(c.usage is None for c in chunks)


def test_tool_call_round_trip(serve_fake, sdk):
    client = sdk(serve_fake(script=weather_script))
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    out = client.chat.completions.create(model="fake", messages=messages, tools=[WEATHER_TOOL])
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}

    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"},
    ]
    second = client.chat.completions.create(model="fake", messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "The weather: sunny, 21 C"
    # The resent assistant call matches the tokens the model sampled, so the history is cached.
    assert second.usage.prompt_tokens_details.cached_tokens > out.usage.prompt_tokens


def test_streamed_tool_call_arrives_as_one_delta(serve_fake, sdk):
    client = sdk(serve_fake(script=weather_script))
    chunks = list(
        client.chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "w?"}], tools=[WEATHER_TOOL], stream=True
        )
    )
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert len(calls) == 1
    assert calls[0].index == 0 and calls[0].id.startswith("call_")
    assert calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_without_tools_the_call_text_is_plain_content(serve_fake, sdk):
    client = sdk(serve_fake(script=weather_script))
    out = client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "w?"}])
    assert out.choices[0].message.content == TOOL_CALL
    assert out.choices[0].finish_reason == "stop"


def test_stop_strings_cut_the_reply(serve_fake, sdk):
    client = sdk(serve_fake(script=lambda conv: "alpha STOP beta"))
    messages = [{"role": "user", "content": "x"}]
    out = client.chat.completions.create(model="fake", messages=messages, stop=["STOP", "zzz"])
    assert out.choices[0].message.content == "alpha "
    assert out.choices[0].finish_reason == "stop"
    chunks = list(client.chat.completions.create(model="fake", messages=messages, stop="STOP", stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "alpha "


def test_max_tokens_gives_finish_reason_length(serve_fake, sdk):
    client = sdk(serve_fake())
    out = client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "long"}], max_tokens=4
    )
    assert out.choices[0].message.content == "echo"
    assert out.choices[0].finish_reason == "length"
    assert out.usage.completion_tokens == 4


def test_resending_the_full_history_hits_the_cache(serve_fake, sdk):
    client = sdk(serve_fake())
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "first question"}]
    first = client.chat.completions.create(model="fake", messages=messages)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "second"},
    ]
    second = client.chat.completions.create(model="fake", messages=messages)
    assert second.choices[0].message.content == "echo: second"
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert first.usage.prompt_tokens + first.usage.completion_tokens <= cached < second.usage.prompt_tokens
    assert second.model_extra["whiz"]["prefill_tokens"] == second.usage.prompt_tokens - cached


def test_client_leaving_a_stream_stops_the_engine(serve_fake, leave_a_stream):
    served = serve_fake(script=lambda conv: "y" * 3000, engine_kw={"step_s": 0.005})
    assert leave_a_stream(served) == (1, 0)


def test_a_reply_begun_by_the_client_is_continued_and_says_so(serve_fake, sdk):
    client = sdk(serve_fake())
    begun = [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "echo: hel"}]
    out = client.chat.completions.create(
        model="fake", messages=begun, extra_body={"continue_final_message": True}
    )
    assert out.choices[0].message.content == "lo there"  # the rest of the reply, not a new one
    assert out.model_extra["whiz"]["continued"] is True
    streamed = client.chat.completions.create(
        model="fake", messages=begun, stream=True, extra_body={"continue_final_message": True}
    )
    chunks = list(streamed)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "lo there"
    assert chunks[-1].model_extra["whiz"]["continued"] is True
    # Without the flag, the assistant's message is a turn of its own, closed, and a new one answers.
    plain = client.chat.completions.create(model="fake", messages=begun)
    assert plain.choices[0].message.content == "echo: hello there"
    assert "continued" not in plain.model_extra["whiz"]


@pytest.mark.parametrize(
    "last",
    [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]},
    ],
)  # fmt: skip
def test_continuing_what_is_not_the_start_of_a_reply_is_a_clear_error(serve_fake, sdk, last):
    client = sdk(serve_fake())
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model="fake",
            messages=[{"role": "user", "content": "hi"}, last],
            extra_body={"continue_final_message": True},
        )
    assert err.value.body["param"] == "continue_final_message"
    assert "the assistant's" in err.value.body["message"]
