"""Tenants all the way through: behind a gateway, one key's prompt is as invisible to another key
(its `cached_tokens`, its sessions) as on one server."""

from __future__ import annotations

import httpx

from whiz.server.auth import TENANT_HEADER, KeyCheck

SECRET = "Secret plan: ship the thing on Friday. " * 20


def cached(base_url: str, key: str, text: str, headers: dict | None = None) -> int:
    body = {"instructions": SECRET, "input": text, "max_output_tokens": 3}
    r = httpx.post(
        f"{base_url}/responses", json=body, headers={"Authorization": f"Bearer {key}", **(headers or {})}
    )
    assert r.status_code == 200, r.text
    return r.json()["usage"]["input_tokens_details"]["cached_tokens"]


def test_behind_a_gateway_one_key_cannot_see_anothers_cached_prefix(serve_fake, gateway):
    replica = serve_fake()  # a keyless replica on loopback: the usual deployment
    gw = gateway([replica.root], api_keys=["alice", "eve"])
    cached(gw.base_url, "alice", "first")
    assert cached(gw.base_url, "eve", "probe") == 0
    assert cached(gw.base_url, "alice", "second") > len(SECRET) // 2  # alice keeps her own sharing


def test_a_keyed_replica_trusts_the_tenant_only_from_its_gateway(serve_fake, gateway):
    replica = serve_fake(api_keys=["direct"], gateway_keys=["gw-secret"])
    gw = gateway([replica.root], api_keys=["alice", "eve"], upstream_key="gw-secret")
    cached(gw.base_url, "alice", "first")
    assert cached(gw.base_url, "eve", "probe") == 0
    assert cached(gw.base_url, "alice", "second") > len(SECRET) // 2
    # A direct client naming alice's tenant is not alice: the header is ignored from its key.
    alice = KeyCheck(["alice"]).tenant("alice")
    assert cached(replica.base_url, "direct", "probe", {TENANT_HEADER: alice}) == 0


def test_two_keys_naming_the_same_session_are_two_sessions(serve_fake, gateway):
    replica = serve_fake()
    gw = gateway([replica.root], api_keys=["alice", "eve"])
    same = {"x-session-id": "shared-name"}
    cached(gw.base_url, "alice", "first", same)
    assert cached(gw.base_url, "eve", "probe", same) == 0


def test_a_malformed_tenant_header_is_refused(serve_fake):
    replica = serve_fake()
    r = httpx.post(
        f"{replica.base_url}/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}]},
        headers={TENANT_HEADER: "x" * 65},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == TENANT_HEADER
