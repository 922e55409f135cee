"""Responses carry every field the Open Responses specification requires, on every transport:
a plain HTTP response, each event of an SSE stream, and each event of the WebSocket mode."""

import json

import httpx
from websockets.sync.client import connect

from .spec_shapes import WS_ERROR, event_problems, fields, response_problems
from .test_chat import weather_script

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def sse_events(r: httpx.Response) -> list[dict]:
    return [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]


def ws_url(served) -> str:
    return served.base_url.replace("http", "ws", 1) + "/responses"


def ws_turn(ws, **body) -> list[dict]:
    """The events of one WebSocket turn, through its terminal event or an error."""
    ws.send(json.dumps({"type": "response.create", "model": "fake", **body}))
    events = []
    while True:
        ev = json.loads(ws.recv(timeout=10))
        events.append(ev)
        if ev["type"] in ("response.completed", "response.incomplete", "response.failed", "error"):
            return events


def test_an_http_response_has_every_required_field(serve_fake):
    served = serve_fake()
    r = httpx.post(f"{served.base_url}/responses", json={"model": "fake", "input": "hi"})
    body = r.json()
    assert response_problems(body) == []
    assert body["status"] == "completed" and body["completed_at"] >= body["created_at"]
    assert body["truncation"] == "disabled" and body["background"] is False
    assert body["service_tier"] == "default" and body["reasoning"] == {"effort": None, "summary": None}
    # A stored response reads back the same.
    again = httpx.get(f"{served.base_url}/responses/{body['id']}").json()
    assert again == body


def test_function_tools_are_echoed_with_strict_and_a_null_description(serve_fake):
    served = serve_fake()
    body = {"model": "fake", "input": "hi", "tools": [WEATHER, {**WEATHER, "name": "loose", "strict": False}]}
    resp = httpx.post(f"{served.base_url}/responses", json=body).json()
    assert response_problems(resp) == []
    echoed, loose = resp["tools"]
    assert echoed["strict"] is True and echoed["description"] is None  # calls follow the schema
    assert loose["strict"] is False  # what the request said stands


def test_request_fields_are_echoed(serve_fake):
    served = serve_fake()
    body = {
        "model": "fake",
        "input": "hi",
        "prompt_cache_key": "k1",
        "safety_identifier": "user-7",
        "max_tool_calls": 3,
        "parallel_tool_calls": False,
        "truncation": "auto",
    }
    resp = httpx.post(f"{served.base_url}/responses", json=body).json()
    assert (resp["prompt_cache_key"], resp["safety_identifier"], resp["max_tool_calls"]) == (
        "k1",
        "user-7",
        3,
    )
    assert resp["parallel_tool_calls"] is False and resp["truncation"] == "auto"


def test_a_background_request_is_refused_with_the_reason(serve_fake):
    served = serve_fake()
    r = httpx.post(f"{served.base_url}/responses", json={"model": "fake", "input": "hi", "background": True})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "background" and "not supported" in r.json()["error"]["message"]


def test_every_sse_event_has_its_required_fields(serve_fake):
    served = serve_fake()
    body = {"model": "fake", "input": "hi", "stream": True}
    events = sse_events(httpx.post(f"{served.base_url}/responses", json=body))
    assert events[-1]["type"] == "response.completed"
    assert [p for ev in events for p in event_problems(ev)] == []
    assert events[0]["response"]["completed_at"] is None  # set only once it completes
    assert events[-1]["response"]["completed_at"] is not None


def test_function_call_events_have_their_required_fields(serve_fake):
    served = serve_fake(script=weather_script)
    body = {"model": "fake", "input": "weather?", "tools": [WEATHER], "stream": True}
    events = sse_events(httpx.post(f"{served.base_url}/responses", json=body))
    types = [ev["type"] for ev in events]
    assert "response.function_call_arguments.done" in types
    assert [p for ev in events for p in event_problems(ev)] == []
    [call] = events[-1]["response"]["output"]
    assert call["type"] == "function_call" and json.loads(call["arguments"]) == {"city": "Paris"}


def test_every_websocket_event_has_its_required_fields(serve_fake):
    served = serve_fake(script=weather_script)
    with connect(ws_url(served)) as ws:
        plain = ws_turn(ws, input="hi", store=False)
        calls = ws_turn(ws, input="weather?", tools=[WEATHER])
        warm = ws_turn(ws, input="hi", generate=False)
        err = ws_turn(ws, input="hi", previous_response_id="resp_nope")
    for events in (plain, calls, warm):
        assert events[-1]["type"] == "response.completed"
        assert [p for ev in events for p in event_problems(ev)] == []
    assert fields(err[-1], WS_ERROR, "error") == [] and event_problems(err[-1]) == []


def broken_script(conversation: str) -> str:
    raise RuntimeError("the model broke")


def test_a_failed_response_has_every_required_field(serve_fake):
    served = serve_fake(script=broken_script)
    body = {"model": "fake", "input": "hi", "stream": True}
    events = sse_events(httpx.post(f"{served.base_url}/responses", json=body))
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["message"]
    assert [p for ev in events for p in event_problems(ev)] == []
