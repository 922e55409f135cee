"""No route can forget the key: on a server with keys, every route of the app (the model API, the
browser app's workspace and heal routes, a gateway's) refuses a request without a key or with a
wrong one, except the few on the documented allow-list, and lets the right key through."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from whiz.commands.serve import build_app
from whiz.config import ServeSettings
from whiz.engine.fake import echo_script, fake_engine
from whiz.gateway import build_gateway
from whiz.server.guards import PUBLIC_PATHS

BASE_URL = "http://127.0.0.1:8321"


def _app(kind: str, tmp_path: Path):
    settings = dict(model="fake", temperature=0, api_keys=["right"])
    if kind == "gateway":
        config = ServeSettings(upstreams=["http://127.0.0.1:9"], health_interval_s=60, **settings)
        return build_app(build_gateway(config), config), None
    (tmp_path / "ws").mkdir()
    engine = fake_engine(echo_script)
    config = ServeSettings(workspace=tmp_path / "ws", test_cmd="true", **settings)
    return build_app(engine, config), engine


@pytest.fixture(params=["engine", "gateway"])
def keyed(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path / "home"))
    app, engine = _app(request.param, tmp_path)
    with TestClient(app, base_url=BASE_URL) as client:
        yield client
    if engine is not None:
        engine.close()


def _routes(app) -> list[tuple[str, str]]:
    """(method or "WS", a concrete path) for every route of `app`."""
    out = []
    for route in app.routes:
        path = route.path.replace("{response_id}", "resp_x")
        if isinstance(route, WebSocketRoute):
            out.append(("WS", path))
        elif isinstance(route, Route):
            out += [(m, path) for m in sorted(route.methods - {"HEAD"})]
        elif isinstance(route, Mount):
            out.append(("GET", path + "/index.html"))
        else:
            raise AssertionError(f"a route of a kind the key check does not know: {route!r}")
    return out


def _refused_socket(client: TestClient, path: str, headers: dict) -> tuple[dict, int]:
    with client.websocket_connect("ws://127.0.0.1:8321" + path, headers=headers) as ws:
        event = json.loads(ws.receive_text())
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    return event, closed.value.code


@pytest.mark.parametrize("auth", [None, "Bearer wrong"])
def test_every_route_but_the_public_ones_refuses_without_the_right_key(keyed: TestClient, auth):
    routes = _routes(keyed.app)
    assert len(routes) >= 10
    headers = {"Authorization": auth} if auth else {}
    checked = 0
    for method, path in routes:
        public = path in PUBLIC_PATHS or any(path.startswith(p + "/") for p in PUBLIC_PATHS if p != "/")
        if public:
            continue
        checked += 1
        if method == "WS":
            event, code = _refused_socket(keyed, path, headers)
            assert event["status"] == 401 and code == 1008, (path, event, code)
            continue
        r = keyed.request(method, path, headers=headers, content=b"{}")
        assert r.status_code == 401, (method, path, r.status_code, r.text[:200])
        assert "key" in r.text.lower(), (method, path, r.text[:200])
    assert checked >= 8


def test_the_public_routes_are_the_documented_ones(keyed: TestClient):
    public = {p for _, p in _routes(keyed.app) if p in PUBLIC_PATHS or p.startswith("/static/")}
    assert public <= PUBLIC_PATHS | {"/static/index.html"}
    assert keyed.get("/health").status_code in (200, 503)  # a gateway with no live replica: 503
    assert keyed.get("/whiz/codex/models.json").status_code == 200
    doc = (Path(__file__).parents[2] / "docs" / "limits-connections.md").read_text()
    for path in PUBLIC_PATHS:
        assert f"`{path}`" in doc, f"{path} is public but docs/limits-connections.md does not say so"


def test_the_right_key_gets_through(keyed: TestClient):
    ok = {"Authorization": "Bearer right"}
    assert keyed.get("/v1/models", headers=ok).status_code == 200
    assert keyed.get("/metrics", headers=ok).status_code == 200
    missing = keyed.get("/v1/responses/resp_x", headers=ok)
    assert missing.status_code == 404  # let in: the route itself answers
    anthropic = keyed.post("/v1/messages/count_tokens", headers={"x-api-key": "right"}, json={"messages": []})
    assert anthropic.status_code != 401


def test_an_unknown_path_is_still_a_404_and_a_wrong_method_a_405(keyed: TestClient):
    assert keyed.get("/v1/nothing").status_code == 404
    assert keyed.get("/v1/chat/completions").status_code == 405
