"""The WebSocket's browser checks: Origin against the server's own host, and the key as a subprotocol."""

from __future__ import annotations

import base64
import json

import pytest
from starlette.websockets import WebSocketDisconnect

from whiz.errors import Forbidden
from whiz.server.browser import FORBIDDEN_CLOSE_CODE, BrowserGuard, is_loopback, key_from_subprotocols

from .conftest import ORIGIN

# TestClient sends Host "testserver" unless the URL names a host.
WS_URL = "ws://127.0.0.1:8321/v1/responses"


def key_protocol(key: str) -> str:
    return "whiz-key." + base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def one_turn(ws) -> list[dict]:
    ws.send_text(json.dumps({"type": "response.create", "model": "fake", "input": "hi"}))
    events = []
    while True:
        ev = json.loads(ws.receive_text())
        events.append(ev)
        if ev["type"] in ("response.completed", "error"):
            return events


def refused(client, **kwargs) -> tuple[dict, int, str]:
    """Connect, and return the error event and the close code and reason that follow it."""
    with client.websocket_connect(WS_URL, **kwargs) as ws:
        error = json.loads(ws.receive_text())
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    return error, closed.value.code, closed.value.reason


def test_the_page_itself_may_connect(make_client):
    client = make_client()
    with client.websocket_connect(WS_URL, headers={"Origin": ORIGIN}) as ws:
        assert one_turn(ws)[-1]["response"]["output"][0]["content"][0]["text"] == "echo: hi"


def test_clients_without_origin_may_connect(make_client):
    # The openai SDK and the Codex CLI send no Origin.
    client = make_client()
    with client.websocket_connect(WS_URL) as ws:
        assert one_turn(ws)[-1]["type"] == "response.completed"


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "http://127.0.0.1:9999", "http://127.0.0.1", "null", "file://"]
)
def test_other_origins_are_refused_with_a_clear_close_code(make_client, origin):
    client = make_client()
    error, code, reason = refused(client, headers={"Origin": origin})
    assert code == FORBIDDEN_CLOSE_CODE
    assert reason == "origin_not_allowed"
    assert error["error"]["code"] == "origin_not_allowed"
    assert error["status"] == 403


def test_a_rebound_host_is_refused(make_client):
    client = make_client()
    error, code, _ = refused(
        client, headers={"Origin": "http://evil.example:8321", "Host": "evil.example:8321"}
    )
    assert code == FORBIDDEN_CLOSE_CODE and error["error"]["code"] == "host_not_allowed"


def test_the_key_as_a_subprotocol(make_client):
    client = make_client(api_keys=["s3cret/+="])
    with client.websocket_connect(
        WS_URL, subprotocols=["whiz", key_protocol("s3cret/+=")], headers={"Origin": ORIGIN}
    ) as ws:
        assert ws.accepted_subprotocol == "whiz"  # never the key: browsers need one of theirs echoed
        assert one_turn(ws)[-1]["type"] == "response.completed"


@pytest.mark.parametrize(
    "protocols",
    [["whiz", key_protocol("wrong")], ["whiz", "whiz-key.%%%"], ["whiz"]],
    ids=["wrong", "garbled", "none"],
)
def test_a_bad_or_missing_key_is_refused(make_client, protocols):
    client = make_client(api_keys=["s3cret"])
    error, code, reason = refused(client, subprotocols=protocols, headers={"Origin": ORIGIN})
    assert code == 1008
    assert error["status"] == 401
    assert reason in ("invalid_api_key", "missing_api_key")


def test_the_authorization_header_still_works(make_client):
    client = make_client(api_keys=["s3cret"])
    with client.websocket_connect(WS_URL, headers={"Authorization": "Bearer s3cret"}) as ws:
        assert one_turn(ws)[-1]["type"] == "response.completed"


def test_guard_rules():
    guard = BrowserGuard(loopback_only=True)
    guard.check({"host": "localhost:8321", "origin": "http://localhost:8321"})
    guard.check({"host": "[::1]:8321", "origin": "http://[::1]:8321"})
    guard.check({"host": "127.0.0.1", "origin": "http://127.0.0.1:80"})  # default ports are equal
    with pytest.raises(Forbidden):
        guard.check({"host": "localhost:8321", "origin": "http://127.0.0.1:8321"})  # another origin
    open_guard = BrowserGuard(loopback_only=False)  # --host 0.0.0.0: any name, same origin only
    open_guard.check({"host": "box.lan:8321", "origin": "http://box.lan:8321"})
    with pytest.raises(Forbidden):
        open_guard.check({"host": "box.lan:8321", "origin": "http://other.lan:8321"})
    assert is_loopback("127.0.0.2") and is_loopback("app.localhost") and not is_loopback("0.0.0.0")
    assert key_from_subprotocols(["whiz", key_protocol("k")]) == "k"
    assert key_from_subprotocols(["whiz"]) is None
