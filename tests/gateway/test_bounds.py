"""The gateway's work per request is bounded: candidates, retries, and what it reads ahead."""

from __future__ import annotations

import httpx

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_n_fans_out_to_a_bounded_number_of_upstream_requests(upstreams, gateway):
    up = upstreams()
    gw = gateway([up.url], max_n=2)
    r = httpx.post(f"{gw.base_url}/chat/completions", json={**CHAT, "n": 3})
    assert r.status_code == 400 and r.json()["error"]["param"] == "n"
    assert up.fake.bodies == []  # refused before anything went upstream
    r = httpx.post(f"{gw.base_url}/chat/completions", json={**CHAT, "n": 2})
    assert r.status_code == 200 and len(r.json()["choices"]) == 2
    assert len(up.fake.bodies) == 2


def test_a_turn_tries_a_bounded_number_of_replicas(upstreams, gateway):
    ups = [upstreams() for _ in range(5)]
    for up in ups:
        up.fake.mode = "down"
    gw = gateway([u.url for u in ups])
    r = httpx.post(f"{gw.base_url}/chat/completions", json=CHAT, timeout=10)
    assert r.status_code >= 500 and r.json()["error"]["message"]
    assert sum(len(u.fake.bodies) for u in ups) == gw.gateway.max_attempts == 3
