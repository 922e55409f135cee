"""The gateway's work per request is bounded: candidates, retries, and what it reads ahead."""

from __future__ import annotations

import asyncio
import time

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


def test_clients_that_leave_mid_stream_leave_no_upstream_stream_open(upstreams, gateway):
    # Each stream a client leaves must be closed upstream at once: one left open keeps the replica
    # generating for no one and holds a pooled connection, and once the pool (100) is used up every
    # later turn through the gateway waits forever. Seen in `whiz bench soak --gateway`.
    up = upstreams(script=lambda messages: "word " * 1000, delay_s=0.01)
    gw = gateway([up.url])
    body = {**CHAT, "stream": True}

    async def leave(http: httpx.AsyncClient) -> None:
        async with http.stream("POST", f"{gw.base_url}/chat/completions", json=body) as r:
            lines = 0
            async for _ in r.aiter_lines():
                lines += 1
                if lines >= 6:
                    break

    async def many_leave() -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            await asyncio.gather(*(leave(http) for _ in range(40)))

    asyncio.run(many_leave())
    # The replies take 12 s each: the fake counts a stream closed before its reply ended, so this
    # wait only keeps a gateway that never closes them from hanging the test.
    deadline = time.monotonic() + 10
    while up.fake.streams_closed_early < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert up.fake.streams_closed_early == 40
    r = httpx.post(f"{gw.base_url}/chat/completions", json={**CHAT, "max_tokens": 8}, timeout=10)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "word wor"
