"""Tenants and liveness: one API key cannot probe another's prompt through the cache, and /health
tells a gateway when the engine's worker is gone."""

from __future__ import annotations

import time

import httpx
import pytest

SYSTEM = "Secret plan: ship the thing on Friday. " * 20


def cached(served, key: str | None, text: str) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else None
    body = {"instructions": SYSTEM, "input": text, "max_output_tokens": 3}
    r = httpx.post(f"{served.base_url}/responses", json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["usage"]["input_tokens_details"]["cached_tokens"]


def test_one_key_cannot_see_another_keys_cached_prefix(serve_fake):
    served = serve_fake(api_keys=["alice", "eve"])
    cached(served, "alice", "first")
    assert cached(served, "eve", "probe") == 0
    assert cached(served, "alice", "second") > len(SYSTEM) // 2  # alice keeps her own sharing


def test_without_keys_the_server_shares_prefixes(serve_fake):
    served = serve_fake()
    cached(served, None, "first")
    assert cached(served, None, "second") > len(SYSTEM) // 2


class _ThreadKiller(BaseException):
    pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_health_reports_a_dead_worker_and_it_comes_back(serve_fake):
    served = serve_fake()
    assert httpx.get(f"{served.root}/health").json()["load"]["engine_worker_alive"] == 1

    def deadly() -> None:
        raise _ThreadKiller()

    served.engine._step = deadly
    httpx.post(f"{served.base_url}/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
    deadline = time.monotonic() + 5
    while served.engine.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    dead = httpx.get(f"{served.root}/health")
    assert dead.status_code == 503 and dead.json()["status"] == "engine_dead"
    del served.engine._step  # the bug is gone; the worker was restarted by that check
    ok = httpx.get(f"{served.root}/health")
    assert ok.status_code == 200 and ok.json()["load"]["engine_worker_restarts"] == 1
    r = httpx.post(
        f"{served.base_url}/chat/completions", json={"messages": [{"role": "user", "content": "y"}]}
    )
    assert r.json()["choices"][0]["message"]["content"] == "echo: y"


def _stored(served, key: str) -> str:
    body = {"input": "my secret question", "max_output_tokens": 3, "store": True}
    r = httpx.post(f"{served.base_url}/responses", json=body, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200, r.text
    return r.json()["id"]


def test_a_stored_response_is_read_only_by_its_own_key(serve_fake):
    served = serve_fake(api_keys=["alice", "eve"])
    rid = _stored(served, "alice")
    alice, eve = ({"Authorization": f"Bearer {k}"} for k in ("alice", "eve"))
    assert httpx.get(f"{served.base_url}/responses/{rid}", headers=alice).status_code == 200
    stolen = httpx.get(f"{served.base_url}/responses/{rid}", headers=eve)
    unknown = httpx.get(f"{served.base_url}/responses/resp_nonexistent", headers=eve)
    assert stolen.status_code == unknown.status_code == 404
    assert "secret" not in stolen.text


def test_another_keys_response_cannot_be_continued(serve_fake):
    served = serve_fake(api_keys=["alice", "eve"])
    rid = _stored(served, "alice")

    def follow_up(key: str, previous: str) -> httpx.Response:
        body = {"input": "go on", "previous_response_id": previous, "max_output_tokens": 3}
        headers = {"Authorization": f"Bearer {key}"}
        return httpx.post(f"{served.base_url}/responses", json=body, headers=headers)

    stolen = follow_up("eve", rid)
    assert stolen.status_code == follow_up("eve", "resp_nonexistent").status_code
    assert stolen.json()["error"]["code"] == "previous_response_not_found"
    assert follow_up("alice", rid).status_code == 200


def test_metrics_need_the_key_on_a_keyed_server(serve_fake):
    served = serve_fake(api_keys=["alice"])
    assert httpx.get(f"{served.root}/metrics").status_code == 401
    assert httpx.get(f"{served.root}/metrics", headers={"Authorization": "Bearer nope"}).status_code == 401
    ok = httpx.get(f"{served.root}/metrics", headers={"Authorization": "Bearer alice"})
    assert ok.status_code == 200 and "whiz_requests_total" in ok.text
    assert httpx.get(f"{served.root}/health").status_code == 200  # load balancers probe without a key


def test_metrics_are_open_without_keys(serve_fake):
    served = serve_fake()
    assert httpx.get(f"{served.root}/metrics").status_code == 200


def test_one_tenant_storing_many_responses_pushes_out_only_its_own(serve_fake):
    served = serve_fake(api_keys=["alice", "eve"], stored_responses=8)
    kept = _stored(served, "alice")
    flood = [_stored(served, "eve") for _ in range(20)]  # far past the whole store
    body = {"input": "go on", "previous_response_id": kept, "max_output_tokens": 3}
    r = httpx.post(f"{served.base_url}/responses", json=body, headers={"Authorization": "Bearer alice"})
    assert r.status_code == 200, r.text
    eve = {"Authorization": "Bearer eve"}
    # The flood keeps the rest of the store, its newest first: the bound still holds.
    assert httpx.get(f"{served.base_url}/responses/{flood[-1]}", headers=eve).status_code == 200
    assert httpx.get(f"{served.base_url}/responses/{flood[0]}", headers=eve).status_code == 404
    assert served.state.store.held(served.state.keys.tenant("alice")) == 2
    assert served.state.store.held(served.state.keys.tenant("eve")) == 6  # the bound still holds
