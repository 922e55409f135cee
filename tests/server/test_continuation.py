"""A failed or cancelled response cannot be continued, over HTTP and WebSocket, and the error says
why; a failed continuation evicts the response it continued from the connection's cache."""

import json

import httpx
from websockets.sync.client import connect

from whiz.engine.fake import last_user_message

from .spec_shapes import event_problems
from .test_spec_responses import ws_turn, ws_url


def breaks_on_boom(conversation: str) -> str:
    last = last_user_message(conversation)
    if last == "boom":
        raise RuntimeError("the model broke")
    if last == "long":
        return "x" * 3000
    return f"turns={conversation.count('<|im_start|>user')}"


def post(served, **body) -> httpx.Response:
    return httpx.post(f"{served.base_url}/responses", json={"model": "fake", **body})


def test_a_failed_http_response_is_stored_but_cannot_be_continued(serve_fake):
    served = serve_fake(script=breaks_on_boom)
    events = [
        json.loads(line[6:])
        for line in post(served, input="boom", stream=True).text.splitlines()
        if line.startswith("data: ")
    ]
    failed = events[-1]["response"]
    assert failed["status"] == "failed"
    assert httpx.get(f"{served.base_url}/responses/{failed['id']}").json()["status"] == "failed"
    r = post(served, input="again", previous_response_id=failed["id"])
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "previous_response_id" and err["code"] == "previous_response_not_found"
    assert f"'{failed['id']}' failed" in err["message"] and "cannot be continued" in err["message"]


def test_a_tool_output_with_no_call_before_it_is_a_400_naming_it(serve_fake):
    served = serve_fake(script=breaks_on_boom)
    first = post(served, input="hi").json()
    orphan = {"type": "function_call_output", "call_id": "call_nowhere", "output": "?"}
    r = post(served, previous_response_id=first["id"], input=[orphan])
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "input.0.call_id" and "call_nowhere" in r.json()["error"]["message"]
    # An output that answers a call sent in the same input is fine.
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    assert post(served, input=[call, {**orphan, "call_id": "c1"}]).json()["status"] == "completed"


def test_a_failed_websocket_continuation_evicts_what_it_continued(serve_fake):
    served = serve_fake(script=breaks_on_boom)
    orphan = {"type": "function_call_output", "call_id": "call_nowhere", "output": "?"}
    with connect(ws_url(served)) as ws:
        first = ws_turn(ws, store=False, input="one")[-1]["response"]
        [failed] = ws_turn(ws, store=False, previous_response_id=first["id"], input=[orphan])
        [retry] = ws_turn(ws, store=False, previous_response_id=first["id"], input="two")
        fresh = ws_turn(ws, store=False, input="two")
    assert failed["type"] == "error" and failed["status"] == 400
    assert failed["error"]["code"] == "tool_call_not_found"
    assert retry["error"]["code"] == "previous_response_not_found" and retry["status"] == 400
    assert "evicted" in retry["error"]["message"]
    assert event_problems(retry) == []
    assert fresh[-1]["response"]["status"] == "completed"  # the connection goes on


def test_a_websocket_turn_that_fails_in_the_model_cannot_be_continued(serve_fake):
    served = serve_fake(script=breaks_on_boom)
    with connect(ws_url(served)) as ws:
        first = ws_turn(ws, store=False, input="one")[-1]["response"]
        failed = ws_turn(ws, store=False, previous_response_id=first["id"], input="boom")[-1]["response"]
        [from_failed] = ws_turn(ws, previous_response_id=failed["id"], input="x")
        [from_first] = ws_turn(ws, previous_response_id=first["id"], input="x")
    assert failed["status"] == "failed"
    assert (
        "failed" in from_failed["error"]["message"]
        and "cannot be continued" in from_failed["error"]["message"]
    )
    assert "evicted" in from_first["error"]["message"]


def test_a_stored_response_evicted_by_a_failure_continues_from_the_store(serve_fake):
    """With store: true the specification lets a server hydrate an evicted response from what it
    stored, so the same turn sent again after a failure goes through with the history intact."""
    served = serve_fake(script=breaks_on_boom)
    with connect(ws_url(served)) as ws:
        first = ws_turn(ws, input="one")[-1]["response"]
        assert (
            ws_turn(ws, previous_response_id=first["id"], input="boom")[-1]["response"]["status"] == "failed"
        )
        again = ws_turn(ws, previous_response_id=first["id"], input="two")[-1]["response"]
    assert again["status"] == "completed"
    assert again["output"][0]["content"][0]["text"] == "turns=2"


def test_a_cancelled_websocket_response_cannot_be_continued_but_the_one_before_can(serve_fake):
    served = serve_fake(script=breaks_on_boom, engine_kw={"step_s": 0.005})
    with connect(ws_url(served)) as ws:
        first = ws_turn(ws, input="one")[-1]["response"]
        ws.send(json.dumps({"type": "response.create", "previous_response_id": first["id"], "input": "long"}))
        deltas = 0
        while True:
            ev = json.loads(ws.recv(timeout=10))
            deltas += ev["type"] == "response.output_text.delta"
            if deltas == 5:
                ws.send(json.dumps({"type": "response.cancel"}))
            if ev["type"].startswith("response.") and ev.get("response", {}).get("status") == "cancelled":
                break
        cancelled = ev["response"]
        [err] = ws_turn(ws, previous_response_id=cancelled["id"], input="next")
        retried = ws_turn(ws, previous_response_id=first["id"], input="next")[-1]["response"]
    assert err["error"]["code"] == "previous_response_not_found"
    assert f"'{cancelled['id']}' cancelled" in err["error"]["message"]
    assert retried["status"] == "completed"
    assert retried["output"][0]["content"][0]["text"] == "turns=2"  # one, then next: not long


def test_eviction_remembers_only_a_few_reasons(serve_fake):
    served = serve_fake(script=breaks_on_boom)
    with connect(ws_url(served)) as ws:
        ids = [ws_turn(ws, input="boom")[-1]["response"]["id"] for _ in range(20)]
        [oldest] = ws_turn(ws, previous_response_id=ids[0], input="x")
        [newest] = ws_turn(ws, previous_response_id=ids[-1], input="x")
    assert "not the latest" in oldest["error"]["message"]
    assert "failed" in newest["error"]["message"]
