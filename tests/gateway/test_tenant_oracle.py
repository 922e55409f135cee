"""One tenant's prompt is not another's cache, through the gateway, for every kind of upstream.

Key A sends a secret; key B then sends guesses with the same opening, the right one first. What
B reads (usage, the `whiz` counts) must be the same as in a world where A never spoke. Where the
upstream keeps tenants apart (a whiz replica that honours the gateway's tenant, vLLM with
`cache_salt`) B still shares its own prefixes, and a whiz replica does the same work for B in
both worlds; where it cannot, B is told no cached tokens at all, and the gateway says so at start.
"""

from __future__ import annotations

import hashlib

import httpx
import pytest
from rich.console import Console

from whiz.commands.serve import _print_tenants
from whiz.server.auth import KeyCheck

TEMPLATE = "You are the support bot of one shop. Answer in one line. " * 6
SECRET = "My card number is 4417 2290 1188 3305 and my PIN is 9931, keep them safe. " * 4
WRONG = "My card number is 5500 0000 0000 0004 and my PIN is 1234, keep them safe. " * 4
GUESSES = [SECRET, SECRET[:90] + " please", WRONG, SECRET[:40]]
NOT_THE_CACHE = ("ttft_ms", "prefill_ms", "decode_ms", "tokens_per_s", "replica")
"""Wall-clock readings, and the replica's address (another in each world)."""

KEYS = ["key-a", "key-b"]


def send(base_url: str, key: str, text: str) -> dict:
    messages = [{"role": "system", "content": TEMPLATE}, {"role": "user", "content": text}]
    r = httpx.post(
        f"{base_url}/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={"messages": messages, "max_tokens": 4},
    )
    assert r.status_code == 200, r.text
    answer = r.json()
    whiz = {k: v for k, v in (answer.get("whiz") or {}).items() if k not in NOT_THE_CACHE}
    return {"usage": answer["usage"], "whiz": whiz}


def cached(seen: dict) -> int:
    return seen["usage"]["prompt_tokens_details"]["cached_tokens"]


def whiz_replica(serve_fake, **replica):
    """A whiz replica on the fake engine, and the gateway settings that reach it."""

    def start():
        served = serve_fake(**replica)
        return served.root, served.engine.runtime

    return start


def fake_upstream(upstreams, **options):
    def start():
        return upstreams(**options).url, None

    return start


KINDS = {
    # kind: (how to start it, the gateway's settings, whether it keeps tenants apart)
    "whiz without keys": (lambda f, u: whiz_replica(f), {}, True),
    "whiz with --gateway-key": (
        lambda f, u: whiz_replica(f, api_keys=["direct"], gateway_keys=["gw"]),
        {"upstream_key": "gw"},
        True,
    ),
    "whiz with the gateway's key as a plain key": (
        lambda f, u: whiz_replica(f, api_keys=["gw"]),
        {"upstream_key": "gw"},
        False,
    ),
    "vllm with cache_salt": (
        lambda f, u: fake_upstream(u, owned_by="vllm", version="0.9.2", salts=True),
        {},
        True,
    ),
    "vllm without cache_salt": (lambda f, u: fake_upstream(u, owned_by="vllm", version="0.8.5"), {}, False),
    "llama.cpp": (lambda f, u: fake_upstream(u, owned_by="llamacpp"), {}, False),
    "openai-compatible": (lambda f, u: fake_upstream(u, owned_by="someone"), {}, False),
}


@pytest.mark.parametrize("kind", KINDS)
def test_b_learns_nothing_of_as_prompt(serve_fake, upstreams, gateway, kind):
    make, settings, keeps = KINDS[kind]

    def world(a_speaks: bool) -> tuple[list, list[int], bool]:
        url, runtime = make(serve_fake, upstreams)()
        gw = gateway([url], api_keys=KEYS, **settings)
        if a_speaks:
            send(gw.base_url, "key-a", SECRET)
        seen, work = [], []
        for guess in GUESSES:
            before = runtime.decoded_tokens if runtime else 0
            seen.append(send(gw.base_url, "key-b", guess))
            work.append((runtime.decoded_tokens if runtime else 0) - before)
        return seen, work, gw.gateway.router.replicas[0].upstream.keeps_tenants

    alone, alone_work, kept = world(a_speaks=False)
    beside, beside_work, _ = world(a_speaks=True)
    assert beside == alone
    assert kept is keeps
    if keeps:
        assert beside_work == alone_work  # a whiz replica's work for B, and so B's timings
        assert cached(alone[1]) > len(TEMPLATE)  # B still shares its own prefixes
    else:
        assert all(cached(s) == 0 for s in alone)
        assert all(s["whiz"]["prefill_tokens"] == s["usage"]["prompt_tokens"] for s in alone)


def test_a_replica_that_stops_keeping_tenants_apart_is_noticed_on_its_next_answer(serve_fake, gateway):
    replica = serve_fake(api_keys=["direct"], gateway_keys=["gw"])
    gw = gateway([replica.root], api_keys=KEYS, upstream_key="gw")
    upstream = gw.gateway.router.replicas[0].upstream
    assert upstream.keeps_tenants
    replica.state.keys = KeyCheck(["direct", "gw"])  # restarted with the gateway's key as a plain key
    send(gw.base_url, "key-a", SECRET)
    assert cached(send(gw.base_url, "key-b", SECRET)) == 0
    assert not upstream.keeps_tenants
    replica.state.keys = KeyCheck(["direct"], ["gw"])  # and fixed again
    send(gw.base_url, "key-b", SECRET)
    assert upstream.keeps_tenants
    assert cached(send(gw.base_url, "key-b", SECRET)) > len(SECRET)


def test_the_gateway_says_at_start_where_keys_share_a_cache(serve_fake, upstreams, gateway):
    def banner(url: str, **settings) -> str:
        gw = gateway([url], api_keys=KEYS, **settings)
        console = Console(record=True, width=400)
        _print_tenants(gw.gateway.router.replicas[0].upstream, console)
        return console.export_text()

    shared = banner(upstreams(owned_by="llamacpp").url)
    assert "share one cache" in shared and "reported as 0" in shared and "response times" in shared
    plain = banner(serve_fake(api_keys=["gw"]).root, upstream_key="gw")
    assert "share one cache" in plain and "--gateway-key" in plain
    assert "kept apart" in banner(serve_fake().root)


def test_vllm_is_sent_a_salt_per_key_that_names_no_key(upstreams, gateway):
    vllm = upstreams(owned_by="vllm", version="0.10.1", salts=True)
    gw = gateway([vllm.url], api_keys=KEYS)
    send(gw.base_url, "key-a", "hi")
    send(gw.base_url, "key-b", "hi")
    salts = [b["cache_salt"] for b in vllm.fake.bodies]
    assert len(set(salts)) == 2 and all(len(s) == 32 and int(s, 16) >= 0 for s in salts)
    # Neither a key nor a plain digest of one: an upstream cannot test guesses of a key.
    plain = {KeyCheck(KEYS).tenant(k) for k in KEYS}
    plain |= {hashlib.sha256(t.encode()).hexdigest()[:32] for t in set(plain)}
    assert not any(k in s for s in salts for k in KEYS) and not plain & set(salts)


def test_a_replicas_rate_limit_counts_each_key_behind_the_gateway_apart(serve_fake, gateway):
    replica = serve_fake(api_keys=["direct"], gateway_keys=["gw"], rate_limit_rpm=2)
    gw = gateway([replica.root], api_keys=KEYS, upstream_key="gw")

    def status(key: str) -> int:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        auth = {"Authorization": f"Bearer {key}"}
        return httpx.post(f"{gw.base_url}/chat/completions", headers=auth, json=body).status_code

    assert [status("key-a") for _ in range(3)] == [200, 200, 429]
    assert status("key-b") == 200  # A spent its own share of the replica, not B's


def test_a_gateway_with_one_key_reports_every_upstreams_cache_hits(upstreams, gateway):
    llama = upstreams(owned_by="llamacpp")
    gw = gateway([llama.url], api_keys=["only"])  # one tenant: nothing to keep apart
    send(gw.base_url, "only", SECRET)
    assert cached(send(gw.base_url, "only", SECRET)) > len(SECRET)


def test_a_gateway_behind_a_gateway_says_it_keeps_keys_apart_only_where_its_upstreams_do(
    serve_fake, upstreams, gateway
):
    def front_over(url: str):
        inner = gateway([url])  # a keyless gateway: it takes the tenant from its caller
        outer = gateway([inner.root], api_keys=KEYS)
        return outer.gateway.router.replicas[0].upstream

    assert front_over(serve_fake().root).keeps_tenants
    over_llama = front_over(upstreams(owned_by="llamacpp").url)
    assert not over_llama.keeps_tenants
