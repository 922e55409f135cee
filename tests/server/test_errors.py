"""Bad requests over HTTP get OpenAI-shaped errors, and the server keeps answering good ones."""

import json

import httpx
import pytest
from openai import AuthenticationError

GOOD_CHAT = {"model": "fake", "messages": [{"role": "user", "content": "ok"}]}


def assert_error(r: httpx.Response, status: int, code: str, param: str | None = None) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["code"] == code
    assert err["param"] == param
    assert err["message"]
    return err


def assert_still_serves(served, headers: dict | None = None) -> None:
    r = httpx.post(f"{served.base_url}/chat/completions", json=GOOD_CHAT, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "echo: ok"


BAD_BODIES = [
    ("chat/completions", b"{not json", "invalid_json", None),
    ("responses", b"\xff\xfe", "invalid_json", None),
    ("chat/completions", b"[1, 2]", "invalid_request", None),
    ("chat/completions", json.dumps({"messages": "hi"}).encode(), "invalid_request", "messages"),
    (
        "chat/completions",
        json.dumps({**GOOD_CHAT, "temperature": "hot"}).encode(),
        "invalid_request",
        "temperature",
    ),
    (
        "chat/completions",
        json.dumps({**GOOD_CHAT, "temperature": 5}).encode(),
        "invalid_request",
        "temperature",
    ),
    (
        "chat/completions",
        json.dumps({**GOOD_CHAT, "max_tokens": 0}).encode(),
        "invalid_request",
        "max_tokens",
    ),
    ("chat/completions", json.dumps({"messages": []}).encode(), "invalid_request", "messages"),
    (
        "chat/completions",
        json.dumps({"messages": [{"role": "robot", "content": "x"}]}).encode(),
        "invalid_request",
        "messages.0.role",
    ),
    (
        "chat/completions",
        json.dumps(
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}
        ).encode(),
        "invalid_request",
        "messages.0.content.0.type",
    ),
    ("responses", json.dumps({"input": 42}).encode(), "invalid_request", "input"),
    (
        "chat/completions",
        json.dumps({"messages": [{"role": "user", "content": 5}]}).encode(),
        "invalid_request",
        "messages.0.content",
    ),
    ("responses", json.dumps({"input": []}).encode(), "invalid_request", "input"),
    (
        "responses",
        json.dumps({"input": [{"type": "message", "role": "robot", "content": "x"}]}).encode(),
        "invalid_request",
        "input.0.role",
    ),
    ("responses", json.dumps({"input": [{"type": "audio"}]}).encode(), "invalid_request", "input.0.type"),
    (
        "responses",
        json.dumps({"input": "x", "tools": [{"type": "function"}]}).encode(),
        "invalid_request",
        "tools.0.name",
    ),
]


def test_bad_bodies_are_400_with_the_param(serve_fake):
    served = serve_fake()  # one server for all cases: each must leave it able to serve the next
    for path, body, code, param in BAD_BODIES:
        r = httpx.post(
            f"{served.base_url}/{path}", content=body, headers={"Content-Type": "application/json"}
        )
        err = assert_error(r, 400, code, param)
        assert err["type"] == "invalid_request_error"
        assert_still_serves(served)


def test_input_over_the_context_window(serve_fake):
    served = serve_fake(engine_kw={"n_ctx": 512})
    long = "z" * 600
    chat = httpx.post(
        f"{served.base_url}/chat/completions", json={"messages": [{"role": "user", "content": long}]}
    )
    assert_error(chat, 400, "context_length_exceeded", "messages")
    resp = httpx.post(f"{served.base_url}/responses", json={"input": long})
    assert_error(resp, 400, "context_length_exceeded", "input")
    streamed = httpx.post(f"{served.base_url}/responses", json={"input": long, "stream": True})
    assert_error(streamed, 400, "context_length_exceeded", "input")
    assert_still_serves(served)


def test_api_keys(serve_fake, sdk):
    served = serve_fake(api_keys=["k1"])
    url = f"{served.base_url}/chat/completions"
    assert_error(httpx.post(url, json=GOOD_CHAT), 401, "missing_api_key")
    assert_error(
        httpx.post(url, json=GOOD_CHAT, headers={"Authorization": "Bearer nope"}), 401, "invalid_api_key"
    )
    assert_error(httpx.get(f"{served.base_url}/models"), 401, "missing_api_key")
    with pytest.raises(AuthenticationError):
        sdk(served, api_key="wrong").chat.completions.create(**GOOD_CHAT)
    out = sdk(served, api_key="k1").chat.completions.create(**GOOD_CHAT)
    assert out.choices[0].message.content == "echo: ok"
    assert httpx.get(f"{served.root}/health").status_code == 200  # health needs no key


def test_websocket_refuses_a_bad_key_with_an_error_event(serve_fake, sdk):
    served = serve_fake(api_keys=["k1"])
    with sdk(served, api_key="wrong").responses.connect() as conn:
        ev = conn.recv()
        assert ev.type == "error"
        assert ev.error.code == "invalid_api_key"
        assert ev.status == 401
    with sdk(served, api_key="k1").responses.connect() as conn:
        conn.response.create(model="fake", input="hi")
        for ev in conn:
            if ev.type in ("response.completed", "error"):
                break
        assert ev.type == "response.completed" and ev.response.output_text == "echo: hi"


def test_rate_limit(serve_fake):
    served = serve_fake(rate_limit_rpm=2)
    url = f"{served.base_url}/chat/completions"
    assert httpx.post(url, json=GOOD_CHAT).status_code == 200
    assert httpx.post(url, json=GOOD_CHAT).status_code == 200
    third = httpx.post(url, json=GOOD_CHAT)
    assert_error(third, 429, "rate_limit_exceeded")
    assert third.json()["error"]["type"] == "rate_limit_error"
    assert int(third.headers["Retry-After"]) >= 1
    # Other endpoints are not limited; without keys, a made-up bearer string is no way around it.
    assert httpx.get(f"{served.base_url}/models").status_code == 200
    dodge = httpx.post(url, json=GOOD_CHAT, headers={"Authorization": "Bearer other"})
    assert_error(dodge, 429, "rate_limit_exceeded")


def test_rate_limit_is_per_valid_key(serve_fake):
    served = serve_fake(rate_limit_rpm=1, api_keys=["k1", "k2"])
    url = f"{served.base_url}/chat/completions"
    k1, k2 = ({"Authorization": f"Bearer {k}"} for k in ("k1", "k2"))
    assert httpx.post(url, json=GOOD_CHAT, headers=k1).status_code == 200
    assert_error(httpx.post(url, json=GOOD_CHAT, headers=k1), 429, "rate_limit_exceeded")
    assert httpx.post(url, json=GOOD_CHAT, headers=k2).status_code == 200  # another key, its own bucket
    # A wrong key is refused before it could take a bucket of its own.
    assert_error(
        httpx.post(url, json=GOOD_CHAT, headers={"Authorization": "Bearer x"}), 401, "invalid_api_key"
    )


def test_body_over_max_body_mb(serve_fake):
    served = serve_fake(max_body_mb=0.01)
    big = {"messages": [{"role": "user", "content": "a" * 20_000}]}
    assert_error(httpx.post(f"{served.base_url}/chat/completions", json=big), 413, "payload_too_large")
    assert_error(
        httpx.post(f"{served.base_url}/responses", json={"input": "b" * 20_000}), 413, "payload_too_large"
    )
    assert_still_serves(served)


def test_unknown_route_and_method(serve_fake):
    served = serve_fake()
    err = assert_error(httpx.get(f"{served.base_url}/nothing"), 404, "not_found")
    assert err["type"] == "invalid_request_error"
    assert_error(httpx.get(f"{served.base_url}/chat/completions"), 405, "method_not_allowed")
    assert_still_serves(served)


def test_models_health_and_metrics(serve_fake, sdk):
    served = serve_fake(engine_kw={"n_ctx": 4096})
    client = sdk(served)
    [model] = client.models.list().data
    assert model.id == "fake"
    assert model.model_extra["context_window"] == 4096
    health = httpx.get(f"{served.root}/health").json()
    assert health["status"] == "ok" and health["model"] == "fake"

    client.chat.completions.create(**GOOD_CHAT)
    client.responses.create(model="fake", input="hi")
    httpx.post(f"{served.base_url}/chat/completions", content=b"{")
    r = httpx.get(f"{served.root}/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    lines = set(r.text.splitlines())
    assert "# TYPE whiz_requests_total counter" in lines
    assert 'whiz_requests_total{api="chat"} 1' in lines
    assert 'whiz_requests_total{api="responses.http"} 1' in lines
    assert 'whiz_errors_total{code="invalid_json"} 1' in lines
    assert "whiz_responses_total 2" in lines
    assert "whiz_engine_active 0" in lines
