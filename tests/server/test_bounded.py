"""Every request is bounded and cancellable: a client that leaves stops its work, output has a
default cap, stop strings and `n` are bounded, and SIGTERM ends the server within its grace."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from tests.conftest import Served
from whiz.gateway.local import LocalServer

from .test_errors import GOOD_CHAT, assert_error, assert_still_serves
from .test_websocket import wait_for

LONG = "x" * 6000
NO_DRAFTS = {"whiz": {"speculation": False}}  # one token per step, so a long reply takes long


def long_script(conversation: str) -> str:
    return LONG


def chat(content: str = "go", **extra) -> dict:
    return {"model": "fake", "messages": [{"role": "user", "content": content}], **NO_DRAFTS, **extra}


def active(served) -> int:
    return served.engine.status()["active"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("chat/completions", chat()),
        ("responses", {"model": "fake", "input": "go", **NO_DRAFTS}),
    ],
)
def test_a_client_that_leaves_a_non_streaming_request_stops_the_engine(serve_fake, path, body):
    served = serve_fake(long_script, engine_kw={"step_s": 0.01})
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{served.base_url}/{path}", json=body, timeout=0.5)
    # The client hung up; the engine must not go on generating ~4000 tokens for no one.
    assert wait_for(lambda: active(served) == 0, timeout_s=2.0), served.engine.status()
    assert_still_serves_long(served)


def test_a_client_that_leaves_a_messages_request_stops_the_engine(serve_fake):
    # No way to turn drafting off here: a reply without repeats keeps it from speeding things up.
    rng = random.Random(0)
    reply = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(6000))
    served = serve_fake(lambda c: reply, engine_kw={"step_s": 0.01})
    body = {"model": "fake", "max_tokens": 6000, "messages": [{"role": "user", "content": "go"}]}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{served.base_url}/messages", json=body, timeout=0.5)
    assert wait_for(lambda: active(served) == 0, timeout_s=2.0), served.engine.status()


def test_messages_stop_sequences_are_bounded(serve_fake):
    served = serve_fake()
    body = {"model": "fake", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(f"{served.base_url}/messages", json={**body, "stop_sequences": ["s" * 65]})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert httpx.post(f"{served.base_url}/messages", json=body).status_code == 200


def assert_still_serves_long(served) -> None:
    r = httpx.post(f"{served.base_url}/chat/completions", json=chat(max_tokens=5), timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "xxxxx"


def test_output_has_a_default_cap(serve_fake):
    served = serve_fake(long_script, max_output_tokens_default=50)
    r = httpx.post(f"{served.base_url}/chat/completions", json=chat(), timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 50
    assert r.json()["choices"][0]["finish_reason"] == "length"
    # A request may still ask for more than the default.
    r = httpx.post(f"{served.base_url}/responses", json={"input": "go", "max_output_tokens": 80}, timeout=10)
    assert r.json()["usage"]["output_tokens"] == 80


@pytest.mark.parametrize(
    "stop",
    [["a", "b", "c", "d", "e"], "s" * 65, ["ok", "t" * 1000]],
    ids=["five stops", "a long stop", "one long stop of two"],
)
def test_stop_strings_are_bounded(serve_fake, stop):
    served = serve_fake()
    r = httpx.post(f"{served.base_url}/chat/completions", json={**GOOD_CHAT, "stop": stop})
    assert_error(r, 400, "invalid_request", "stop")
    ok = httpx.post(f"{served.base_url}/chat/completions", json={**GOOD_CHAT, "stop": ["a", "b", "z", ": "]})
    assert ok.json()["choices"][0]["message"]["content"] == "echo"


def test_n_is_bounded_by_a_setting(serve_fake):
    served = serve_fake(max_n=2)
    r = httpx.post(f"{served.base_url}/chat/completions", json={**GOOD_CHAT, "n": 3})
    assert_error(r, 400, "invalid_request", "n")
    r = httpx.post(f"{served.base_url}/chat/completions", json={**GOOD_CHAT, "n": 2})
    assert [c["message"]["content"] for c in r.json()["choices"]] == ["echo: ok"] * 2


BIG = "y" * 1_000_000
BIG_TOOL = {"type": "function", "function": {"name": "big", "description": BIG, "parameters": {}}}
RESPONSES_TOOL = {"type": "function", "name": "big", "description": BIG, "parameters": {}}


def post(path: str, body: dict) -> Callable[[Served], int]:
    def send(served: Served) -> int:
        return httpx.post(f"{served.root}/v1/{path}", json=body, timeout=30).status_code

    return send


def over_socket(body: dict) -> Callable[[Served], int]:
    def send(served: Served) -> int:
        with connect(served.base_url.replace("http", "ws", 1) + "/responses") as ws:
            ws.send(json.dumps({"type": "response.create", **body}))
            while True:
                event = json.loads(ws.recv(timeout=30))
                if event["type"] == "error":
                    return event["status"]
                if event["type"] == "response.completed":
                    return 200

    return send


@pytest.mark.parametrize(
    ("send", "status"),
    [
        (post("chat/completions", chat(BIG, max_tokens=1)), 400),
        (post("chat/completions", chat(max_tokens=1, prediction={"type": "content", "content": BIG})), 200),
        (post("chat/completions", chat(max_tokens=1, tools=[BIG_TOOL])), 400),
        (post("responses", {"input": "go", "max_output_tokens": 1, "tools": [RESPONSES_TOOL]}), 400),
        (
            post("messages", {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": BIG}]}),
            400,
        ),
        (over_socket({"input": BIG, "max_output_tokens": 1}), 400),
    ],
    ids=["prompt", "prediction", "chat tools", "responses tools", "messages", "websocket"],
)
def test_a_huge_input_does_not_stall_other_clients(serve_fake, send, status):
    # A slow tokenizer (a real one takes seconds over megabytes) runs on a worker thread, so a small
    # request meanwhile answers at once, wherever in the request the megabytes are and whichever
    # API carries them.
    served = serve_fake(engine_kw={"n_ctx": 4096})
    tokenizer = served.engine.tokenizer
    encode = tokenizer.encode

    # The big one's tokenizing is held until the small one is answered: on the event loop, the
    # small one could not be answered until it ended (and times out here instead).
    tokenizing, release = threading.Event(), threading.Event()

    def held_encode(text: str) -> list[int]:
        if len(text) > 50_000:  # a prediction is cut to 16 characters a token of the window first
            tokenizing.set()
            release.wait(timeout=30)
        return encode(text)

    tokenizer.encode = held_encode
    done: list[int] = []
    big = threading.Thread(target=lambda: done.append(send(served)))
    big.start()
    try:
        assert tokenizing.wait(timeout=30), "the big request never reached the tokenizer"
        assert httpx.get(f"{served.base_url}/models", timeout=10).status_code == 200
        assert not done, "the big request ended before the small one was answered"
    finally:
        release.set()
        big.join(timeout=30)
    assert done == [status]  # and it still gets its answer: the overflow, or the reply


def test_sigterm_drains_and_exits_within_the_grace(tmp_path: Path):
    server = LocalServer(
        ["--model", "fake", "--engine-only"], tmp_path, name="whiz-sigterm", start_timeout_s=60
    )
    try:
        server.wait_ready()
        answers: list[object] = []

        def long_request() -> None:
            try:
                answers.append(httpx.post(f"{server.url}/v1/chat/completions", json=chat(LONG), timeout=60))
            except httpx.HTTPError as exc:
                answers.append(exc)

        client = threading.Thread(target=long_request)
        client.start()
        assert wait_for(lambda: _active(server.url) > 0, timeout_s=5)
        server.proc.send_signal(signal.SIGTERM)
        # The grace is 3 s; without a drain the reply takes ~10 s, and past the grace and its
        # margin the server ends itself with status 1, saying it overran.
        code = server.proc.wait(timeout=30)
        assert code in (0, -signal.SIGTERM), f"exit {code}:\n{server.tail()}"
        assert "overran" not in server.tail()
        client.join(timeout=5)
        assert answers, "the client was left waiting"
    finally:
        server.stop()


def _active(url: str) -> float:
    try:
        return httpx.get(f"{url}/health", timeout=1).json()["load"]["engine_active"]
    except httpx.HTTPError:
        return 0


def test_draining_refuses_new_requests(serve_fake):
    served = serve_fake()
    served.state.draining = True
    assert_error(httpx.post(f"{served.base_url}/chat/completions", json=GOOD_CHAT), 503, "server_unavailable")
    health = httpx.get(f"{served.root}/health")
    assert health.status_code == 503 and health.json()["status"] == "draining"
    served.state.draining = False
    assert_still_serves(served)


def test_connections_are_capped_in_all(tmp_path: Path):
    # Each held connection costs memory and a task; past the cap (nginx's worker_connections by
    # default), a new request gets a 503 at once instead of piling up.
    server = LocalServer(
        ["--model", "fake", "--engine-only", "--max-connections", "3"],
        tmp_path,
        name="whiz-max-connections",
        start_timeout_s=60,
    )
    try:
        server.wait_ready()
        socket_url = server.url.replace("http", "ws", 1) + "/v1/responses"
        with contextlib.ExitStack() as held:
            for _ in range(3):
                held.enter_context(connect(socket_url))
            refused = httpx.get(f"{server.url}/v1/models", timeout=5)
            assert refused.status_code == 503
        assert wait_for(lambda: httpx.get(f"{server.url}/v1/models", timeout=5).status_code == 200, 5)
    finally:
        server.stop()
