"""Speculative edits with the real model: same output as plain greedy decoding, fewer steps."""

from __future__ import annotations

import inspect
import json

import httpx
import pytest
from openai import OpenAI
from websockets.sync.client import connect

pytestmark = pytest.mark.model

SYSTEM = (
    "You are a precise code editor. Output the complete updated file in one ```python block, nothing else."
)


def _source(obj) -> str:
    return inspect.getsource(obj)


# Small real files the project did not write, each with a mechanical edit: short, since each is
# decoded plainly too, a token at a time.
import colorsys  # noqa: E402
import shlex  # noqa: E402

CASES = [
    (
        _source(colorsys.rgb_to_yiq) + "\n" + _source(colorsys.hls_to_rgb),
        "Rename the function rgb_to_yiq to rgb_to_yiq_color.",
    ),
    (_source(shlex.join), "Add the decorator @log_calls above the function join."),
]


@pytest.fixture(scope="module")
def client(real_server) -> OpenAI:
    return OpenAI(base_url=real_server.base_url, api_key="unused", timeout=300)


def edit(client, code: str, instruction: str, **extra):
    return client.chat.completions.create(
        model="whiz",
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Instruction: {instruction}\n\n```python\n{code}```"},
        ],
        temperature=0,
        max_tokens=600,
        **extra,
    )


# The first case's second function is there for the two-turn test below; one turn renames in one.
# A rename and an insertion: each is decoded three ways, one of them a token at a time, so another
# rename would add its cost and no new kind of edit.
IDENTITY_CASES = [(_source(colorsys.rgb_to_yiq), CASES[0][1]), CASES[1]]


@pytest.mark.parametrize("code,instruction", IDENTITY_CASES, ids=["rename-function", "add-decorator"])
def test_prediction_and_lookup_output_is_identical_to_plain(real_server, client, code, instruction):
    plain = edit(client, code, instruction, extra_body={"whiz": {"speculation": False}})
    lookup = edit(client, code, instruction)
    predicted = edit(client, code, instruction, prediction={"type": "content", "content": code})
    text = plain.choices[0].message.content
    assert lookup.choices[0].message.content == text
    assert predicted.choices[0].message.content == text
    # The usage fields add up, with OpenAI's names.
    details = predicted.usage.completion_tokens_details
    timings = predicted.model_extra["whiz"]
    # No draft at all: the server's batch costs said none could pay (its /health shows them).
    load = httpx.get(f"{real_server.root}/health", timeout=10).json()["load"]
    costs = {k: v for k, v in load.items() if "batch" in k or "draft" in k}
    assert details.accepted_prediction_tokens == timings["draft_accepted"] > 0, costs
    assert details.rejected_prediction_tokens == timings["draft_rejected"]
    assert details.accepted_prediction_tokens < predicted.usage.completion_tokens
    assert plain.usage.completion_tokens_details.accepted_prediction_tokens == 0


def test_after_rolled_back_drafts_the_next_turn_continues_like_plain(real_server):
    code, instruction = CASES[0]
    url = real_server.base_url.replace("http://", "ws://") + "/responses"

    def conversation(speculation: bool) -> list[str]:
        texts = []
        with connect(url) as ws:
            previous = None
            turns = [
                instruction + f"\n\n```python\n{code}```",
                "Now also rename hls_to_rgb to hls_to_rgb_color.",
            ]
            for i, message in enumerate(turns):
                body = {
                    "type": "response.create",
                    "model": "whiz",
                    "temperature": 0,
                    "max_output_tokens": 600,
                    "instructions": SYSTEM,
                    "input": [{"role": "user", "content": message}],
                    "whiz": {"speculation": speculation},
                }
                if previous:
                    body["previous_response_id"] = previous
                if speculation and i == 0:
                    body["prediction"] = {"type": "content", "content": code}
                ws.send(json.dumps(body))
                while (ev := json.loads(ws.recv(timeout=300)))["type"] not in (
                    "response.completed",
                    "response.incomplete",
                    "response.failed",
                    "error",
                ):
                    pass
                assert ev["type"] != "error", ev
                previous = ev["response"]["id"]
                texts.append(ev["response"]["output"][0]["content"][0]["text"])
                if speculation and i == 1:
                    assert ev["response"]["usage"]["input_tokens_details"]["cached_tokens"] > 0
        return texts

    assert conversation(True) == conversation(False)
