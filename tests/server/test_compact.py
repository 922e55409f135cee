"""POST /v1/responses/compact: a conversation made into a short window that continues over HTTP
and WebSocket, in the shape the Open Responses specification gives it."""

import json

import httpx
from websockets.sync.client import connect

from .spec_shapes import compact_problems, response_problems
from .test_spec_responses import ws_turn, ws_url

CONVERSATION = [
    {"type": "message", "role": "user", "content": "Remember the code word: slate."},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "OK."}]},
    {"type": "function_call", "call_id": "c1", "name": "look", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "nothing there"},
    {"type": "message", "role": "user", "content": "Compress this conversation."},
]


def summary_script(conversation: str) -> str:
    """The summarizer's answer names what it was shown; any other turn says what it sees."""
    if "You compact a conversation" in conversation:
        return "SUMMARY: code word slate" if "slate" in conversation else "SUMMARY: empty"
    return "seen: " + ("summary " if "SUMMARY: code word slate" in conversation else "") + conversation[-40:]


def compact(served, **body) -> httpx.Response:
    return httpx.post(f"{served.base_url}/responses/compact", json={"model": "fake", **body})


def test_compact_keeps_user_messages_and_ends_with_a_compaction_item(serve_fake):
    served = serve_fake(script=summary_script)
    r = compact(served, input=CONVERSATION, prompt_cache_key="k")
    assert r.status_code == 200
    body = r.json()
    assert compact_problems(body) == []
    *kept, item = body["output"]
    assert [(m["role"], m["content"][0]["text"]) for m in kept] == [
        ("user", "Remember the code word: slate."),
        ("user", "Compress this conversation."),
    ]
    assert item["type"] == "compaction" and item["id"].startswith("cmp_")
    assert body["usage"]["output_tokens"] == len("SUMMARY: code word slate")


def test_a_compact_request_without_model_is_a_400_naming_it(serve_fake):
    served = serve_fake()
    r = httpx.post(f"{served.base_url}/responses/compact", json={"input": "hi"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "model" and err["message"] == "'model' is required."


def test_a_compacted_window_continues_over_http(serve_fake):
    served = serve_fake(script=summary_script)
    window = compact(served, input=CONVERSATION).json()["output"]
    body = {"model": "fake", "input": [*window, {"type": "message", "role": "user", "content": "go on"}]}
    resp = httpx.post(f"{served.base_url}/responses", json=body).json()
    assert response_problems(resp) == []
    assert resp["status"] == "completed"
    assert resp["output"][0]["content"][0]["text"].startswith("seen: summary")  # the model read it


def test_a_compacted_window_continues_over_websocket(serve_fake):
    served = serve_fake(script=summary_script)
    window = compact(served, input=CONVERSATION).json()["output"]
    with connect(ws_url(served)) as ws:
        events = ws_turn(
            ws, store=False, input=[*window, {"type": "message", "role": "user", "content": "on"}]
        )
        again = ws_turn(ws, store=False, previous_response_id=events[-1]["response"]["id"], input="more")
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output"][0]["content"][0]["text"].startswith("seen: summary")
    assert again[-1]["type"] == "response.completed"


def test_compact_continues_from_a_stored_response(serve_fake):
    served = serve_fake(script=summary_script)
    first = httpx.post(
        f"{served.base_url}/responses", json={"model": "fake", "input": "the word is slate"}
    ).json()
    body = compact(served, previous_response_id=first["id"], input="and compact").json()
    assert [m["content"][0]["text"] for m in body["output"][:-1]] == ["the word is slate", "and compact"]
    assert (
        compact(served, previous_response_id="resp_nope").json()["error"]["code"]
        == "previous_response_not_found"
    )


def test_a_compaction_item_from_elsewhere_is_a_400_naming_it(serve_fake):
    served = serve_fake()
    foreign = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-someone-elses"}
    r = httpx.post(f"{served.base_url}/responses", json={"model": "fake", "input": [foreign]})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "input.0.encrypted_content"


def test_a_conversation_longer_than_the_context_is_still_compacted(serve_fake):
    served = serve_fake(script=summary_script, engine_kw={"n_ctx": 2048})
    filler = [{"type": "message", "role": "user", "content": "blah " * 300} for _ in range(6)]
    r = compact(served, input=[*filler, {"type": "message", "role": "user", "content": "slate"}])
    assert r.status_code == 200, r.text
    assert json.loads(json.dumps(r.json()))["output"][-1]["type"] == "compaction"
