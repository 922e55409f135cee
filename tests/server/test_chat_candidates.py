"""`n` on /v1/chat/completions: several candidates of one prompt, as OpenAI returns them."""

from __future__ import annotations

import httpx
import pytest
from openai import BadRequestError


def test_n_candidates_come_back_as_indexed_choices_with_summed_usage(serve_fake, sdk):
    client = sdk(serve_fake())
    out = client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "twice"}], n=3, temperature=0
    )
    assert [c.index for c in out.choices] == [0, 1, 2]
    assert [c.message.content for c in out.choices] == ["echo: twice"] * 3
    assert all(c.finish_reason == "stop" for c in out.choices)
    one = len(b"echo: twice")
    assert out.usage.completion_tokens == 3 * one
    assert out.usage.total_tokens == out.usage.prompt_tokens + 3 * one
    assert [c.model_extra["whiz"]["decode_tokens"] for c in out.choices] == [one] * 3


def test_sampled_candidates_differ_and_a_seed_repeats_them(serve_fake, sdk):
    served = serve_fake(engine_kw={"confidence": 4.0})  # sampling often strays from the script
    client = sdk(served)

    def candidates() -> list[str]:
        out = client.chat.completions.create(
            model="fake",
            messages=[{"role": "user", "content": "a longer message to sample a reply for"}],
            n=4,
            temperature=1.0,
            top_p=1.0,
            seed=5,
            max_tokens=30,
        )
        return [c.message.content for c in out.choices]

    first = candidates()
    assert len(set(first)) > 1
    assert candidates() == first


def test_streamed_candidates_carry_their_index(serve_fake, sdk):
    client = sdk(serve_fake())
    messages = [{"role": "user", "content": "in parallel"}]
    chunks = list(
        client.chat.completions.create(
            model="fake", messages=messages, n=2, stream=True, stream_options={"include_usage": True}
        )
    )
    texts: dict[int, str] = {0: "", 1: ""}
    finishes: dict[int, str] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
    assert texts == {0: "echo: in parallel", 1: "echo: in parallel"}
    assert finishes == {0: "stop", 1: "stop"}
    assert chunks[-1].usage.completion_tokens == 2 * len("echo: in parallel")


@pytest.mark.parametrize("n", [0, 5, "two"])
def test_bad_n_is_a_400_naming_n(serve_fake, sdk, n):
    served = serve_fake(engine_kw={"n_seq_max": 4})
    body = {"model": "fake", "messages": [{"role": "user", "content": "x"}], "n": n}
    r = httpx.post(f"{served.base_url}/chat/completions", json=body)
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "n"
    # The server goes on.
    out = sdk(served).chat.completions.create(model="fake", messages=[{"role": "user", "content": "ok"}])
    assert out.choices[0].message.content == "echo: ok"


def test_n_is_refused_before_anything_runs(serve_fake, sdk):
    served = serve_fake(engine_kw={"n_seq_max": 2})
    with pytest.raises(BadRequestError, match="at most 2 candidates"):
        sdk(served).chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "x"}], n=3, stream=True
        )
    assert served.engine.status()["active"] == 0 and served.engine.steps == 0


def test_client_leaving_a_candidates_stream_stops_every_candidate(serve_fake, leave_a_stream):
    served = serve_fake(script=lambda conv: "y" * 3000, engine_kw={"step_s": 0.005})
    assert leave_a_stream(served, n=3) == (3, 0)
