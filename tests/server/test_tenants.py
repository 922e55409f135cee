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
