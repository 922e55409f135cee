"""End to end with the real default model behind `whiz serve`, through the openai SDK.

These show what only a real model shows: the KV cache really is reused across turns (fewer
prefilled tokens, lower TTFT), a cancel really stops llama.cpp within a step, and bad input on
one connection leaves the server and other sessions working.
"""

from __future__ import annotations

import inspect
import json
import textwrap

import httpx
import pytest
from openai import OpenAI
from websockets.sync.client import connect

pytestmark = pytest.mark.model

# Real code as conversation history, so the prompt is long enough for caching to matter.
HISTORY = textwrap.dedent(inspect.getsource(textwrap))[:3500]


@pytest.fixture(scope="module")
def client(real_server) -> OpenAI:
    return OpenAI(base_url=real_server.base_url, api_key="unused", timeout=120)


def ws_url(served) -> str:
    return served.base_url.replace("http://", "ws://") + "/responses"


def until_done(conn):
    for ev in conn:
        if ev.type in ("response.completed", "response.incomplete", "response.failed", "error"):
            return ev
    raise AssertionError("the socket closed before the response ended")


def follow_up(conn, first, text: str):
    """A second turn on the same socket, chained on `first`: one user message, a few tokens."""
    conn.response.create(
        model="whiz",
        previous_response_id=first.response.id,
        input=[{"role": "user", "content": text}],
        temperature=0,
        max_output_tokens=8,
    )
    return until_done(conn)


def test_chat_completion_answers_and_reports_usage_and_timings(client):
    out = client.chat.completions.create(
        model="whiz",
        messages=[{"role": "user", "content": "Write a Python function add(a, b) that returns a + b."}],
        temperature=0,
        max_tokens=60,
    )
    text = out.choices[0].message.content
    assert "def add" in text
    assert out.usage.prompt_tokens > 10 and out.usage.completion_tokens > 0
    timings = out.model_extra["whiz"]
    assert timings["ttft_ms"] > 0 and timings["decode_tokens"] == out.usage.completion_tokens


def test_streamed_chat_matches_the_non_streamed_answer(client):
    messages = [{"role": "user", "content": "Name three Python built-in functions, comma separated."}]
    whole = client.chat.completions.create(model="whiz", messages=messages, temperature=0, max_tokens=30)
    parts = client.chat.completions.create(
        model="whiz", messages=messages, temperature=0, max_tokens=30, stream=True
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in parts if c.choices)
    assert streamed == whole.choices[0].message.content


def test_second_websocket_turn_is_cached_and_prefills_only_what_is_new(client):
    instructions = "You review Python code. Here is the module under review:\n" + HISTORY
    with client.responses.connect() as conn:
        conn.response.create(
            model="whiz",
            instructions=instructions,
            input="Summarize it in one line.",
            temperature=0,
            max_output_tokens=24,
        )
        first = until_done(conn)
        assert first.response.status in ("completed", "incomplete"), first
        second = follow_up(conn, first, "Now in three words.")
    assert second.response.status in ("completed", "incomplete"), second
    u1, u2 = first.response.usage, second.response.usage
    assert u1.input_tokens_details.cached_tokens < 10  # only the shared "<|im_start|>system" head
    # Everything but the new message was already in the KV cache.
    assert u2.input_tokens_details.cached_tokens >= u1.input_tokens + u1.output_tokens - 1
    # The work, not the clock: the second turn computes only the new message's tokens (its speed
    # follows from that, and is whiz bench's to measure).
    p1 = first.response.model_extra["whiz"]["prefill_tokens"]
    p2 = second.response.model_extra["whiz"]["prefill_tokens"]
    assert p2 < p1 / 3
    assert p2 <= u2.input_tokens - u2.input_tokens_details.cached_tokens + 1


def test_http_responses_chain_with_previous_response_id(client):
    first = client.responses.create(model="whiz", input="Say hello.", temperature=0, max_output_tokens=10)
    second = client.responses.create(
        model="whiz",
        previous_response_id=first.id,
        input="Again, shorter.",
        temperature=0,
        max_output_tokens=10,
    )
    assert first.status == "completed" and second.status in ("completed", "incomplete")
    assert second.usage.input_tokens_details.cached_tokens > first.usage.input_tokens


def test_cancel_stops_generation_within_one_step(real_server):
    with connect(ws_url(real_server)) as ws:
        ws.send(
            json.dumps(
                {
                    "type": "response.create",
                    "model": "whiz",
                    "temperature": 0,
                    "input": "Write a long, detailed essay about the history of computing.",
                    "max_output_tokens": 2000,
                    # One token per step, so "within one step" is countable in tokens.
                    "whiz": {"speculation": False},
                }
            )
        )
        deltas = 0
        while True:
            ev = json.loads(ws.recv(timeout=60))
            if ev["type"] == "response.output_text.delta":
                deltas += 1
                if deltas == 5:
                    ws.send(json.dumps({"type": "response.cancel"}))
            if ev["type"] in ("response.completed", "response.incomplete", "response.failed"):
                break
    assert ev["response"]["status"] == "cancelled"
    produced = ev["response"]["usage"]["output_tokens"]
    # Tokens already on the wire when the cancel arrived, plus at most one more decode step.
    assert produced <= deltas + 2


def test_bad_input_leaves_the_server_and_other_sessions_working(client, real_server):
    with client.responses.connect() as good:
        good.response.create(model="whiz", input="Say hi.", temperature=0, max_output_tokens=8)
        first = until_done(good)
        with connect(ws_url(real_server)) as bad:
            huge = "word " * 40000  # far past the 32k-token window
            for raw in [
                "{not json",
                json.dumps({"type": "nope"}),
                json.dumps({"type": "response.create", "input": "x", "temperature": "hot"}),
                json.dumps({"type": "response.create", "input": huge}),
            ]:
                bad.send(raw)
                ev = json.loads(bad.recv(timeout=60))
                assert ev["type"] == "error" and ev["error"]["code"], ev
            codes = [ev["error"]["code"]]
            bad.send(json.dumps({"type": "response.create", "input": "Say ok.", "max_output_tokens": 4}))
            while (ev := json.loads(bad.recv(timeout=60)))["type"] not in (
                "response.completed",
                "response.incomplete",
            ):
                pass
        assert codes == ["context_length_exceeded"]
        r = httpx.post(f"{real_server.base_url}/chat/completions", content=b"{oops", timeout=30)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
        second = follow_up(good, first, "Bye.")
    assert second.response.status in ("completed", "incomplete")
    assert second.response.usage.input_tokens_details.cached_tokens > 0
