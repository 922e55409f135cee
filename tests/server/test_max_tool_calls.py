"""`max_tool_calls`: a response carries at most that many tool calls, over HTTP, SSE and WebSocket.
The calls the model makes past the limit are dropped (the specification's "may make": they are
ignored, as if never made) and the response says how many; the conversation it leaves holds only
the calls it carries, so a continuation answers those and no others."""

from __future__ import annotations

import json

import httpx
import pytest
from websockets.sync.client import connect

from .spec_shapes import event_problems, response_problems
from .test_spec_responses import WEATHER, sse_events, ws_turn, ws_url

CITIES = ("Paris", "Rome", "Oslo")


def three_calls(conversation: str) -> str:
    """Three calls at once; once their outputs are in, the cities it was told about."""
    if "<tool_response>" in conversation:
        seen = [c for c in CITIES if f"sunny in {c}" in conversation]
        return "answered: " + ",".join(seen)
    return "\n".join(
        f'<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "{c}"}}}}\n</tool_call>'
        for c in CITIES
    )


def calls_of(response: dict) -> list[dict]:
    return [item for item in response["output"] if item["type"] == "function_call"]


def outputs(calls: list[dict]) -> list[dict]:
    return [
        {
            "type": "function_call_output",
            "call_id": c["call_id"],
            "output": f"sunny in {json.loads(c['arguments'])['city']}",
        }
        for c in calls
    ]


def test_over_http_only_the_first_calls_are_kept_and_the_response_says_how_many_went(serve_fake):
    served = serve_fake(script=three_calls)
    body = {"model": "fake", "input": "weather?", "tools": [WEATHER], "max_tool_calls": 2}
    resp = httpx.post(f"{served.base_url}/responses", json=body).json()
    assert response_problems(resp) == []
    assert resp["status"] == "completed" and resp["max_tool_calls"] == 2
    kept = calls_of(resp)
    assert [json.loads(c["arguments"])["city"] for c in kept] == ["Paris", "Rome"]
    assert resp["whiz"]["dropped_tool_calls"] == 1
    # The stored response reads back the same, and a continuation answers the calls it carries.
    assert calls_of(httpx.get(f"{served.base_url}/responses/{resp['id']}").json()) == kept
    follow = {"model": "fake", "tools": [WEATHER], "previous_response_id": resp["id"], "input": outputs(kept)}
    again = httpx.post(f"{served.base_url}/responses", json=follow).json()
    assert again["status"] == "completed", again
    assert again["output"][0]["content"][0]["text"] == "answered: Paris,Rome"


def test_the_conversation_a_response_leaves_holds_no_dropped_call(serve_fake):
    served = serve_fake(script=three_calls)
    body = {"model": "fake", "input": "weather?", "tools": [WEATHER], "max_tool_calls": 1}
    resp = httpx.post(f"{served.base_url}/responses", json=body).json()
    [kept] = calls_of(resp)
    # An output for a call the response never carried is one for a call never made.
    dropped = {"type": "function_call_output", "call_id": "call_unknown", "output": "x"}
    follow = {"model": "fake", "tools": [WEATHER], "previous_response_id": resp["id"],
              "input": [*outputs([kept]), dropped]}  # fmt: skip
    r = httpx.post(f"{served.base_url}/responses", json=follow)
    assert r.status_code == 400 and r.json()["error"]["code"] == "tool_call_not_found"


def test_without_a_limit_every_call_is_kept(serve_fake):
    served = serve_fake(script=three_calls)
    body = {"model": "fake", "input": "weather?", "tools": [WEATHER]}
    resp = httpx.post(f"{served.base_url}/responses", json=body).json()
    assert len(calls_of(resp)) == 3 and "dropped_tool_calls" not in resp["whiz"]


def test_a_stream_carries_no_event_of_a_dropped_call(serve_fake):
    served = serve_fake(script=three_calls)
    body = {"model": "fake", "input": "weather?", "tools": [WEATHER], "max_tool_calls": 2, "stream": True}
    events = sse_events(httpx.post(f"{served.base_url}/responses", json=body))
    assert [p for ev in events for p in event_problems(ev)] == []
    added = [ev["item"] for ev in events if ev["type"] == "response.output_item.added"]
    assert [a["type"] for a in added] == ["function_call", "function_call"]
    assert not any("Oslo" in json.dumps(ev) for ev in events)
    final = events[-1]["response"]
    assert events[-1]["type"] == "response.completed" and len(calls_of(final)) == 2
    assert final["whiz"]["dropped_tool_calls"] == 1


def test_over_websocket_the_limit_holds_and_the_chain_goes_on(serve_fake):
    served = serve_fake(script=three_calls)
    with connect(ws_url(served)) as ws:
        first = ws_turn(ws, input="weather?", tools=[WEATHER], max_tool_calls=1)
        resp = first[-1]["response"]
        assert first[-1]["type"] == "response.completed" and len(calls_of(resp)) == 1
        assert not any("Rome" in json.dumps(ev) or "Oslo" in json.dumps(ev) for ev in first)
        again = ws_turn(ws, input=outputs(calls_of(resp)), tools=[WEATHER], previous_response_id=resp["id"])
    assert again[-1]["type"] == "response.completed", again[-1]
    assert again[-1]["response"]["output"][0]["content"][0]["text"] == "answered: Paris"


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_a_bad_limit_is_a_400_naming_the_field(serve_fake, value):
    served = serve_fake()
    body = {"model": "fake", "input": "hi", "max_tool_calls": value}
    r = httpx.post(f"{served.base_url}/responses", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "max_tool_calls"


def test_a_bad_limit_over_websocket_is_an_error_event_naming_the_field(serve_fake):
    served = serve_fake()
    with connect(ws_url(served)) as ws:
        [err] = ws_turn(ws, input="hi", max_tool_calls=-3)
    assert err["type"] == "error" and err["error"]["param"] == "max_tool_calls"
