"""Grammar and prediction have a price, on every API: a hostile tool schema is answered at once
(a grammar, or a 400 that names the cap) while /health and other clients go on; a grammar too
costly to match ends its request with an error naming the bound, on every
transport; a giant prediction is cut; tool counts are capped."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from websockets.sync.client import connect

import whiz.backend.engine
from tests.engine.test_grammar_budget import costly
from tests.server.test_bounded import over_socket
from whiz.bench.attackers import nested_any_of, type_list_bomb
from whiz.server.protocol import MAX_TOOLS

API = ("chat", "responses", "messages")


def body(api: str, schema: dict, *, n_tools: int = 1, **extra) -> tuple[str, dict]:
    """A request on `api` offering `n_tools` tools of `schema`, a call required."""
    names = [f"f{i}" for i in range(n_tools)]
    if api == "chat":
        tools = [{"type": "function", "function": {"name": n, "parameters": schema}} for n in names]
        msg = [{"role": "user", "content": "go"}]
        return "chat/completions", {"messages": msg, "tools": tools, "tool_choice": "required", **extra}
    if api == "responses":
        tools = [{"type": "function", "name": n, "parameters": schema} for n in names]
        return "responses", {"input": "go", "tools": tools, "tool_choice": "required", **extra}
    tools = [{"name": n, "input_schema": schema} for n in names]
    msg = [{"role": "user", "content": "go"}]
    choice = {"type": "any"}
    return "messages", {
        "model": "m",
        "max_tokens": 8,
        "messages": msg,
        "tools": tools,
        "tool_choice": choice,
        **extra,
    }


def error_message(api: str, r: httpx.Response) -> str:
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    return err["message"]


@pytest.mark.parametrize("api", API)
def test_a_tool_grammar_is_built_off_the_event_loop(serve_fake, monkeypatch, api):
    # However long a grammar takes to build, /health answers meanwhile: the build is held here
    # until /health has answered (on the event loop, /health would wait for it forever).
    served = serve_fake()
    building, release = threading.Event(), threading.Event()
    build = whiz.backend.engine.request_grammar

    def held(*args, **kwargs):
        building.set()
        release.wait(timeout=10)
        return build(*args, **kwargs)

    monkeypatch.setattr(whiz.backend.engine, "request_grammar", held)
    path, payload = body(api, {"type": "object", "properties": {"a": {"type": "string"}}})
    answers: list[int] = []
    sender = threading.Thread(
        target=lambda: answers.append(
            httpx.post(f"{served.base_url}/{path}", json=payload, timeout=30).status_code
        )
    )
    sender.start()
    try:
        assert building.wait(timeout=10)
        health = httpx.get(f"{served.root}/health", timeout=5)
        assert health.status_code == 200 and answers == []  # answered while the grammar is built
    finally:
        release.set()
        sender.join(timeout=30)
    assert answers == [200]


@pytest.mark.parametrize("api", API)
def test_the_type_list_bomb_is_a_small_grammar_on_every_api(serve_fake, api):
    # 772 bytes that froze the server for 58 s, /health included: now a grammar of a few rules.
    served = serve_fake()
    path, payload = body(api, type_list_bomb())
    answers: list[httpx.Response] = []
    sender = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{served.base_url}/{path}", json=payload, timeout=120))
    )
    sender.start()
    try:
        time.sleep(0.2)
        assert httpx.get(f"{served.root}/health", timeout=5).status_code == 200
    finally:
        sender.join(timeout=120)
    assert answers[0].status_code == 200, answers[0].text


@pytest.mark.parametrize("api", API)
def test_nested_alternatives_get_a_400_naming_the_cap_on_every_api(serve_fake, api):
    served = serve_fake()
    path, payload = body(api, nested_any_of())
    r = httpx.post(f"{served.base_url}/{path}", json=payload, timeout=30)
    assert r.status_code == 400, r.text
    assert "more than 256 ways" in error_message(api, r)
    # The same request without the grammar is served.
    r = httpx.post(f"{served.base_url}/{path}", json={**payload, "whiz": {"tool_grammar": False}}, timeout=30)
    assert r.status_code == 200, r.text


def _over_budget(served) -> tuple[str, dict]:
    served.engine.runtime.grammar = costly(served.engine.tokenizer, ms_per_id=10.0)
    # The budget's message, or on a machine so loaded that one call's wall time passes the
    # deadline first, the deadline's: either names the grammar's cost and the way out.
    return "Simplify the schema", {"type": "object", "properties": {"a": {"type": "string"}}}


@pytest.mark.parametrize("api", API)
def test_a_grammar_over_its_budget_ends_with_an_error_naming_it(serve_fake, api):
    served = serve_fake(lambda conv: "no call today")
    cause, schema = _over_budget(served)
    path, payload = body(api, schema)
    r = httpx.post(f"{served.base_url}/{path}", json=payload, timeout=30)
    assert r.status_code >= 500 and cause in r.json()["error"]["message"], r.text
    # The same request without the grammar is served.
    r = httpx.post(f"{served.base_url}/{path}", json={**payload, "whiz": {"tool_grammar": False}}, timeout=30)
    assert r.status_code == 200, r.text


def _sse_events(served, path: str, payload: dict) -> list[tuple[str | None, dict | str]]:
    out: list[tuple[str | None, dict | str]] = []
    event = None
    with httpx.stream("POST", f"{served.base_url}/{path}", json={**payload, "stream": True}, timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
                out.append((event, data if data == "[DONE]" else json.loads(data)))
    return out


@pytest.mark.parametrize("api", API)
def test_a_streamed_grammar_over_its_budget_ends_with_an_error_event(serve_fake, api):
    served = serve_fake(lambda conv: "no call today")
    cause, schema = _over_budget(served)
    path, payload = body(api, schema)
    events = _sse_events(served, path, payload)
    errors = [
        data
        for _, data in events
        if isinstance(data, dict) and (data.get("error") or data.get("response", {}).get("error"))
    ]
    assert errors, events
    assert cause in json.dumps(errors[-1])
    if api == "responses":
        assert events[-1][0] == "response.failed"


def test_over_a_websocket_a_grammar_over_its_budget_ends_with_a_failed_response(serve_fake):
    served = serve_fake(lambda conv: "no call today")
    cause, schema = _over_budget(served)
    _, payload = body("responses", schema)
    with connect(served.base_url.replace("http", "ws", 1) + "/responses") as ws:
        ws.send(json.dumps({"type": "response.create", **payload}))
        while True:
            event = json.loads(ws.recv(timeout=30))
            if event["type"] in ("error", "response.failed", "response.completed"):
                break
    assert event["type"] == "response.failed", event
    assert cause in event["response"]["error"]["message"]


@pytest.mark.parametrize(
    ("api", "tools"),
    [
        ("messages", [{"name": f"f{i}", "input_schema": {}} for i in range(MAX_TOOLS + 1)]),
        (
            "responses",
            [
                {
                    "type": "namespace",
                    "name": f"ns{j}",
                    "tools": [{"type": "function", "name": f"f{i}"} for i in range(65)],
                }
                for j in range(2)
            ],
        ),
    ],
    ids=["messages", "responses namespaces"],
)
def test_the_number_of_tools_is_capped(serve_fake, api, tools):
    served = serve_fake()
    path, payload = body(api, {})
    r = httpx.post(f"{served.base_url}/{path}", json={**payload, "tools": tools}, timeout=30)
    assert r.status_code == 400, r.text
    assert str(MAX_TOOLS) in error_message(api, r)
    r = httpx.post(f"{served.base_url}/{path}", json={**payload, "tools": tools[:1]}, timeout=30)
    assert r.status_code == 200, r.text


def test_a_giant_prediction_is_cut_to_the_context_window(serve_fake):
    served = serve_fake(engine_kw={"n_ctx": 4096})
    tokenizer = served.engine.tokenizer
    encode, seen = tokenizer.encode, []

    def spied(text: str) -> list[int]:
        seen.append(len(text))
        return encode(text)

    tokenizer.encode = spied
    giant = "def f():\n    return 1\n" * 350_000  # 8 MB
    payload = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    prediction = {"type": "content", "content": giant}
    r = httpx.post(
        f"{served.base_url}/chat/completions", json={**payload, "prediction": prediction}, timeout=60
    )
    assert r.status_code == 200, r.text
    assert r.json()["whiz"]["prediction"] == "cut to its first 4096 tokens (the context window)"
    assert max(seen) <= 4096 * 16  # never tokenized whole


def test_the_websocket_gets_the_same_400(serve_fake):
    served = serve_fake()
    _, payload = body("responses", nested_any_of())
    assert over_socket(payload)(served) == 400
    assert over_socket({**payload, "whiz": {"tool_grammar": False}})(served) == 200
