"""The tool-call grammar's switches: on by default, off for a server (--no-tool-grammar) or for one
request (`"whiz": {"tool_grammar": false}`), on each API. The fake model writes a call one brace
short, as small models do: with the grammar it arrives as a call, without it as text."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from whiz.engine.types import SamplingParams
from whiz.server.messages import MessagesRequest, turn_request
from whiz.server.protocol import required_tool

UNCLOSED = 'Reading.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>'
CHAT_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def chat(served, **extra) -> dict:
    body = {
        "model": "fake",
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": [CHAT_TOOL],
        **extra,
    }
    r = httpx.post(f"{served.base_url}/chat/completions", json=body, timeout=30)
    r.raise_for_status()
    return r.json()["choices"][0]


def test_a_call_the_model_leaves_unclosed_arrives_whole(serve_fake):
    choice = chat(serve_fake(script=lambda c: UNCLOSED))
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert choice["message"]["content"].strip() == "Reading."


@pytest.mark.parametrize("where", ["server", "request"])
def test_with_the_grammar_off_the_same_reply_is_text(serve_fake, where):
    if where == "server":
        choice = chat(serve_fake(script=lambda c: UNCLOSED, tool_grammar=False))
    else:
        choice = chat(serve_fake(script=lambda c: UNCLOSED), whiz={"tool_grammar": False})
    assert not choice["message"].get("tool_calls")
    assert choice["message"]["content"] == UNCLOSED


def test_a_request_can_turn_it_on_where_the_server_has_it_off(serve_fake):
    choice = chat(serve_fake(script=lambda c: UNCLOSED, tool_grammar=False), whiz={"tool_grammar": True})
    assert choice["message"]["tool_calls"]


def test_responses_and_messages_read_the_switch_too(serve_fake):
    served = serve_fake(script=lambda c: UNCLOSED)
    tool = {"type": "function", "name": "get_weather", "parameters": CHAT_TOOL["function"]["parameters"]}
    for opt, kinds in ((None, {"message", "function_call"}), ({"tool_grammar": False}, {"message"})):
        body = {"model": "fake", "input": "weather?", "tools": [tool], **({"whiz": opt} if opt else {})}
        out = httpx.post(f"{served.base_url}/responses", json=body, timeout=30).json()["output"]
        assert {item["type"] for item in out} == kinds
    claude = anthropic.Anthropic(base_url=served.root, api_key="x", max_retries=0)
    try:
        tool = {"name": "get_weather", "input_schema": CHAT_TOOL["function"]["parameters"]}
        for opt, kinds in ((None, ["text", "tool_use"]), ({"tool_grammar": False}, ["text"])):
            reply = claude.messages.create(
                model="fake",
                max_tokens=200,
                messages=[{"role": "user", "content": "weather?"}],
                tools=[tool],
                extra_body={"whiz": opt} if opt else None,
            )
            assert [b.type for b in reply.content] == kinds
    finally:
        claude.close()


@pytest.mark.parametrize(
    ("choice", "read"),
    [
        ("required", "required"),
        ({"type": "function", "function": {"name": "get_weather"}}, "get_weather"),
        ({"type": "function", "name": "get_weather"}, "get_weather"),  # the Responses API's shape
        ("auto", None),
        ("none", None),
    ],
)
def test_tool_choice_as_the_backend_reads_it(choice, read):
    assert required_tool(choice) == read


def test_a_required_call_is_a_call_even_where_the_model_would_chat(serve_fake):
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    served = serve_fake(script=lambda c: "Sure! " + call)
    assert chat(served)["message"]["content"] == "Sure!"
    forced = chat(served, tool_choice="required", max_tokens=80)["message"]["content"]
    assert forced.lstrip()[0] in "<{[`"  # the fake, pushed off its script, pads; a call it is


@pytest.mark.parametrize(
    ("choice", "read"),
    [
        ({"type": "any"}, "required"),
        ({"type": "tool", "name": "get_weather"}, "get_weather"),
        ({"type": "auto"}, None),
    ],
)
def test_anthropic_tool_choice_as_the_backend_reads_it(choice, read):
    body = {
        "model": "m",
        "max_tokens": 9,
        "messages": [{"role": "user", "content": "hi"}],
        "tool_choice": choice,
    }
    assert turn_request(MessagesRequest.model_validate(body), SamplingParams(), None).tool_choice == read
