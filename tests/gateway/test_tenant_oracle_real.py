"""The prefix oracle across keys, on the real model behind a gateway: key A sends a secret, key B
guesses with the same opening, the right guess first. B's `cached_tokens` must be what they are
in a world where A never spoke (the fake engine's tests hold the class; this one holds it where
it was found, on llama.cpp's cache)."""

from __future__ import annotations

import random

import httpx
import pytest

pytestmark = pytest.mark.model

TEMPLATE = "You are the support bot of one shop. Answer in one line. " * 3


def cached(base_url: str, key: str, text: str) -> int:
    messages = [{"role": "system", "content": TEMPLATE}, {"role": "user", "content": text}]
    r = httpx.post(
        f"{base_url}/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={"messages": messages, "max_tokens": 1},
        timeout=300,
    )
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_b_learns_nothing_of_as_prompt_on_the_real_model(real_server, gateway):
    rng = random.Random()

    def world(a_speaks: bool) -> list[int]:
        # Fresh keys and a fresh secret of the same shape (Qwen splits digits one a token): no
        # world, and no other test on the shared server, shares a tenant or a prompt with another.
        tag = rng.randrange(10**8)
        a, b = f"key-a-{tag}", f"key-b-{tag}"
        pin = "".join(rng.choice("0123456789") for _ in range(8))
        secret = f"My password is tangerine-falcon and my PIN is {pin}. Remember it."
        gw = gateway([real_server.root], api_keys=[a, b])
        if a_speaks:
            cached(gw.base_url, a, secret)
        guesses = [secret, secret[:30] + " owl", "My password is purple"]
        return [cached(gw.base_url, b, g) for g in guesses]

    alone = world(a_speaks=False)
    assert world(a_speaks=True) == alone
    assert alone[1] > alone[0]  # B's own first guess is cached for its second: the test can tell
