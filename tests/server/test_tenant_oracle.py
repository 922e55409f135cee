"""One tenant's prompt is not another's cache, over every API of one server: what key B reads in
its responses (usage, the `whiz` counts) and the work the engine does for it are the same
whether or not key A sent a secret that B's guesses begin like, B's first request included."""

from __future__ import annotations

import httpx
import pytest

from whiz.config import TENANT_HEADER, TENANT_KEPT_HEADER

TEMPLATE = "You are the support bot of one shop. Answer in one line. " * 6
SECRET = "My card number is 4417 2290 1188 3305 and my PIN is 9931, keep them safe. " * 4
WRONG = "My card number is 5500 0000 0000 0004 and my PIN is 1234, keep them safe. " * 4
GUESSES = [SECRET, SECRET[:90] + " please", WRONG, SECRET[:40]]

CLOCK_FIELDS = ("ttft_ms", "prefill_ms", "decode_ms", "tokens_per_s")
"""Wall-clock readings: what they would tell is held by the work count instead."""


def send(base_url: str, key: str, api: str, text: str) -> dict:
    auth = {"Authorization": f"Bearer {key}"}
    if api == "chat":
        messages = [{"role": "system", "content": TEMPLATE}, {"role": "user", "content": text}]
        r = httpx.post(
            f"{base_url}/chat/completions", headers=auth, json={"messages": messages, "max_tokens": 4}
        )
    elif api == "responses":
        body = {"instructions": TEMPLATE, "input": text, "max_output_tokens": 4}
        r = httpx.post(f"{base_url}/responses", headers=auth, json=body)
    elif api == "messages":
        body = {
            "model": "whiz",
            "system": TEMPLATE,
            "max_tokens": 4,
            "messages": [{"role": "user", "content": text}],
        }
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        r = httpx.post(f"{base_url}/messages", headers=headers, json=body)
    else:
        r = httpx.post(
            f"{base_url}/completions", headers=auth, json={"prompt": TEMPLATE + text, "max_tokens": 4}
        )
    assert r.status_code == 200, r.text
    return r.json()


def seen(answer: dict) -> dict:
    """What a client reads of the cache in one answer."""
    whiz = {k: v for k, v in (answer.get("whiz") or {}).items() if k not in CLOCK_FIELDS}
    return {"usage": answer["usage"], "whiz": whiz}


@pytest.mark.parametrize("api", ["chat", "responses", "messages", "completions"])
def test_b_learns_nothing_of_as_prompt(serve_fake, api):
    def world(a_speaks: bool) -> list:
        served = serve_fake(api_keys=["key-a", "key-b"])
        runtime = served.engine.runtime
        if a_speaks:
            send(served.base_url, "key-a", api, SECRET)
        out = []
        for guess in GUESSES:
            before = runtime.decoded_tokens
            answer = send(served.base_url, "key-b", api, guess)
            out.append((seen(answer), runtime.decoded_tokens - before))
        return out

    alone = world(a_speaks=False)
    assert world(a_speaks=True) == alone
    if api != "completions":  # B still shares its own prefixes, so the test can tell
        usage = alone[1][0]["usage"]
        cached = usage.get("cache_read_input_tokens") or (
            usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
        ).get("cached_tokens")
        assert cached > len(TEMPLATE)


def test_the_server_says_it_kept_a_named_tenant_only_where_it_did(serve_fake):
    served = serve_fake(api_keys=["direct"], gateway_keys=["gw"])
    named = {TENANT_HEADER: "t1"}

    def kept(key: str, headers: dict) -> str | None:
        r = httpx.get(f"{served.base_url}/models", headers={"Authorization": f"Bearer {key}", **headers})
        assert r.status_code == 200
        return r.headers.get(TENANT_KEPT_HEADER)

    assert kept("gw", named) == "1"
    assert kept("direct", named) is None  # a plain key's named tenant is ignored, and it says so
    assert kept("gw", {}) is None
    keyless = serve_fake()
    assert httpx.get(f"{keyless.base_url}/models", headers=named).headers.get(TENANT_KEPT_HEADER) == "1"
