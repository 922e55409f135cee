"""Hostile input gets an OpenAI-style error, and nothing else breaks: the same connection, and
other sessions, go on being served. Memory stays bounded in bytes."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest
from websockets.sync.client import connect

from whiz.server import protocol
from whiz.server.messages import MessagesRequest
from whiz.server.protocol import ChatRequest, ResponsesRequest
from whiz.server.responses import Conversation, ResponseStore

from .test_errors import GOOD_CHAT, assert_error, assert_still_serves

DEEP = "[" * 100_000 + "]" * 100_000
NESTED_70 = {
    "model": "fake",
    "messages": [{"role": "user", "content": "hi"}],
    "x": json.loads("[" * 70 + "]" * 70),
}

# (path, raw body, expected status): each one a way clients have crashed servers.
HOSTILE_HTTP = [
    ("chat/completions", DEEP.encode(), 400),
    ("chat/completions", json.dumps(NESTED_70).encode(), 400),
    ("responses", ('{"input": "' + "\\ud800" + '"}').encode(), 400),
    ("chat/completions", (b'{"messages": [{"role": "user", "content": "a\\udfff"}]}'), 400),
    ("chat/completions", json.dumps({**GOOD_CHAT, "seed": -1}).encode(), 200),
    ("chat/completions", json.dumps({**GOOD_CHAT, "seed": 2**64}).encode(), 400),
    ("chat/completions", json.dumps({**GOOD_CHAT, "n": 10**9}).encode(), 400),
    ("chat/completions", json.dumps({**GOOD_CHAT, "max_tokens": 10**30}).encode(), 200),
    ("chat/completions", json.dumps({**GOOD_CHAT, "stop": ["x"] * 10_000}).encode(), 400),
    ("chat/completions", json.dumps({**GOOD_CHAT, "temperature": float("nan")}).encode(), 400),
    ("chat/completions", b'{"messages": 1e999999}', 400),
    ("chat/completions", b"\x00\x01\x02", 400),
    ("chat/completions", b"", 400),
    ("responses", json.dumps({"input": "hi", "metadata": {f"k{i}": "v" for i in range(17)}}).encode(), 400),
    ("responses", json.dumps({"input": "hi", "metadata": {"k": "v" * 513}}).encode(), 400),
    ("responses", json.dumps({"input": "hi", "metadata": {"k" * 65: "v"}}).encode(), 400),
    ("responses", json.dumps({"input": "hi", "metadata": {"k": {"nested": 1}}}).encode(), 400),
    ("responses", json.dumps({"input": "hi", "tools": [{"type": "x"}] * 129}).encode(), 400),
    ("responses", json.dumps({"input": [{"type": "message", "role": "user", "content": [1]}]}).encode(), 400),
    ("responses", json.dumps({"input": "hi", "seed": -(2**63)}).encode(), 200),
]


@pytest.mark.parametrize(
    ("path", "raw", "status"), HOSTILE_HTTP, ids=[f"{i}" for i in range(len(HOSTILE_HTTP))]
)
def test_hostile_http_bodies_get_an_error_and_the_server_goes_on(serve_fake, path, raw, status):
    served = serve_fake()
    with httpx.Client() as client:  # one connection: it must survive the bad request too
        r = client.post(
            f"{served.base_url}/{path}", content=raw, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == status, r.text
        if status >= 400:
            err = r.json()["error"]
            assert set(err) == {"message", "type", "param", "code"} and err["message"]
        again = client.post(f"{served.base_url}/chat/completions", json=GOOD_CHAT)
        assert again.json()["choices"][0]["message"]["content"] == "echo: ok"


HOSTILE_EVENTS: list[str | bytes] = [
    b"\x00binary\xff",
    "not json",
    DEEP,
    '{"type": "response.create", "input": "\\ud800"}',
    json.dumps({"type": "response.create", "input": "hi", "seed": -1, "max_output_tokens": 3}),
    json.dumps({"type": "response.create", "input": "hi", "metadata": {"k": "v" * 600}}),
    json.dumps({"type": "response.create", "input": [{"type": "message", "role": "robot"}]}),
    json.dumps({"type": 7}),
    "[]",
    "null",
]


def ws_url(served) -> str:
    return served.base_url.replace("http", "ws", 1) + "/responses"


def one_turn(ws, text: str = "hi") -> dict:
    ws.send(json.dumps({"type": "response.create", "model": "fake", "input": text}))
    while True:
        ev = json.loads(ws.recv(timeout=10))
        if ev["type"] in ("response.completed", "error"):
            return ev


def test_hostile_websocket_events_get_an_error_event_and_the_session_goes_on(serve_fake):
    served = serve_fake()
    with connect(ws_url(served)) as ws, connect(ws_url(served)) as other:
        for event in HOSTILE_EVENTS:
            ws.send(event)
            reply = json.loads(ws.recv(timeout=10))
            if reply["type"] == "error":
                assert reply["error"]["message"] and reply["error"]["code"], reply
            else:  # the seed -1 turn is fine: it runs
                while reply["type"] not in ("response.completed", "response.incomplete"):
                    reply = json.loads(ws.recv(timeout=10))
        done = one_turn(ws)
        assert done["type"] == "response.completed"
        assert done["response"]["output"][0]["content"][0]["text"] == "echo: hi"
        assert one_turn(other, "you")["response"]["output"][0]["content"][0]["text"] == "echo: you"
    assert_still_serves(served)


def test_a_websocket_queue_is_bounded(serve_fake):
    served = serve_fake(lambda c: "x" * 2000, engine_kw={"step_s": 0.01}, ws_queue_max=2)
    with connect(ws_url(served)) as ws:
        create = json.dumps({"type": "response.create", "input": "go", "whiz": {"speculation": False}})
        for _ in range(4):  # one runs, two wait, the fourth finds the queue full
            ws.send(create)
        errors = []
        deadline = time.monotonic() + 5
        while not errors and time.monotonic() < deadline:
            ev = json.loads(ws.recv(timeout=5))
            if ev["type"] == "error":
                errors.append(ev)
        assert errors and errors[0]["error"]["code"] == "queue_full"


def test_websocket_sessions_are_capped_per_key(serve_fake):
    served = serve_fake(max_ws_sessions_per_key=2)
    with connect(ws_url(served)) as a, connect(ws_url(served)) as b:
        with connect(ws_url(served)) as third:
            refused = json.loads(third.recv(timeout=5))
            assert refused["error"]["code"] == "too_many_connections"
        assert one_turn(a)["type"] == one_turn(b)["type"] == "response.completed"
    with connect(ws_url(served)) as again:  # closed sessions give their place back
        assert one_turn(again)["type"] == "response.completed"


def test_a_chunked_body_is_refused_while_it_streams_in(serve_fake):
    served = serve_fake(max_body_mb=0.01)  # about 10 kB
    host, port = served.root.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"x" * 4096
        sent = 0
        try:
            # Far more than the limit: the server answers 413 without waiting for the end.
            for _ in range(64):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
        except OSError:
            pass  # the server closed the connection: it stopped reading
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert_still_serves(served)


def conversation(text: str) -> Conversation:
    from whiz.chat.messages import Message

    return Conversation(state=[1, 2, 3], messages=[Message("user", text)], system=None, tools=())


def test_stored_responses_are_bounded_by_bytes_and_age():
    now = [0.0]
    store = ResponseStore(100, max_bytes=10_000, ttl_s=60, clock=lambda: now[0])
    for i in range(10):
        store.put({"id": f"r{i}"}, conversation("x" * 2000))
    assert store.bytes <= 10_000
    assert store.get("r0") is None and store.get("r9") is not None  # oldest out first
    store.put({"id": "huge"}, conversation("x" * 50_000))  # larger than the store: not kept
    assert store.get("huge") is None and store.get("r9") is not None
    now[0] = 61
    assert store.get("r9") is None and store.bytes == 0


def test_a_full_store_evicts_the_oldest_of_the_tenant_holding_the_most():
    store = ResponseStore(6, max_bytes=100_000)
    store.put({"id": "b0"}, conversation("b"), "bob")
    store.put({"id": "c0"}, conversation("c"), "carol")
    for i in range(10):
        store.put({"id": f"a{i}"}, conversation("a"), "alice")
    assert store.get("b0", "bob") and store.get("c0", "carol")  # older, but not the flood's
    assert [store.get(f"a{i}", "alice") is not None for i in range(10)] == [False] * 6 + [True] * 4
    # In bytes too: a tenant of a few large responses pushes out its own.
    store = ResponseStore(100, max_bytes=12_000)
    store.put({"id": "small"}, conversation("s" * 100), "bob")
    for i in range(10):
        store.put({"id": f"big{i}"}, conversation("x" * 3000), "alice")
    assert store.get("small", "bob") is not None and store.bytes <= 12_000
    assert store.get("big9", "alice") is not None and store.get("big0", "alice") is None


def test_metadata_within_openai_limits_is_kept(serve_fake):
    served = serve_fake()
    metadata = {f"k{i}": "v" * 512 for i in range(16)}
    r = httpx.post(f"{served.base_url}/responses", json={"input": "hi", "metadata": metadata})
    assert r.status_code == 200 and r.json()["metadata"] == metadata
    bad = httpx.post(f"{served.base_url}/responses", json={"input": "hi", "metadata": {"k": "v" * 513}})
    assert_error(bad, 400, "invalid_request", "metadata")


WIDE = b'{"messages": [{"role": "user", "content": "hi"}], "x": [' + b"0," * 7_000_000 + b"0]}"


@pytest.mark.parametrize("path", ["chat/completions", "responses", "messages", "websocket"])
def test_a_large_body_is_decoded_without_stalling_other_clients(serve_fake, path, monkeypatch):
    # 14 MB of small numbers (under the 16 MB limit) take seconds to decode and check; on the event
    # loop that froze every other stream for as long, once per request. Here its decoding is held
    # until other clients were answered: on the loop, they could not be (and time out instead).
    served = serve_fake()
    done: list[object] = []
    decoding, release = threading.Event(), threading.Event()
    decode = protocol.decode_json

    def held_decode(raw):
        if len(raw) > 1_000_000:
            decoding.set()
            release.wait(timeout=60)
        return decode(raw)

    monkeypatch.setattr(protocol, "decode_json", held_decode)

    def send() -> None:
        if path == "websocket":
            with connect(ws_url(served), max_size=None) as ws:
                ws.send(WIDE.decode())
                done.append(json.loads(ws.recv(timeout=60))["type"])
        else:
            r = httpx.post(f"{served.base_url}/{path}", content=WIDE, timeout=60)
            done.append(r.status_code)

    big = threading.Thread(target=send)
    big.start()
    try:
        assert decoding.wait(timeout=30), "the body was never decoded"
        for _ in range(3):
            assert httpx.get(f"{served.base_url}/models", timeout=10).status_code == 200
        assert not done, "the large body was answered before the others"
    finally:
        release.set()
        big.join(timeout=60)
    assert done and done[0] in (200, 400, "error", "response.created")


MANY = b'{"messages": [' + b"0," * 1_000_000 + b"0]}"


@pytest.mark.parametrize("path", ["chat/completions", "messages", "websocket"])
def test_a_body_of_a_million_small_values_is_refused_quickly(serve_fake, path, monkeypatch):
    # 2 MB, a million wrong messages: validating them made a million error objects, ~10 s of CPU
    # and 1.6 GB of memory per request (16 MB of them would take the machine's memory). It is
    # refused by its count of values, before anything validates a message.
    served = serve_fake()
    validated: list[object] = []
    for model in (ChatRequest, MessagesRequest, ResponsesRequest):
        monkeypatch.setattr(model, "model_validate", counting(model.model_validate, validated))
    if path == "websocket":
        with connect(ws_url(served), max_size=None) as ws:
            ws.send(MANY.decode().replace("{", '{"type": "response.create", "input": "hi", ', 1))
            reply = json.loads(ws.recv(timeout=60))
            assert reply["type"] == "error" and reply["error"]["code"] == "invalid_json", reply
            message = reply["error"]["message"]
    else:
        r = httpx.post(f"{served.base_url}/{path}", content=MANY, timeout=60)
        assert r.status_code == 400
        message = r.json()["error"]["message"]
    assert not validated, "a message was validated"
    assert f"more than {protocol.MAX_JSON_VALUES:,} JSON values" in message, message
    assert_still_serves(served)


def counting(validate, calls: list):
    def counted(*args, **kwargs):
        calls.append(args)
        return validate(*args, **kwargs)

    return counted
