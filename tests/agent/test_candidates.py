"""What `ChatCandidates` asks a server for: one request with n, or one request per candidate.

Candidate i must be sampled with seed + i on every path, so that the parallel and sequential
paths give the same candidates; the bodies are recorded from a stand-in for the HTTP client.
"""

from __future__ import annotations

from typing import Any

from whiz.agent.candidates import ChatCandidates
from whiz.client import ResponseError

MESSAGES = [{"role": "user", "content": "fix it"}]


class RecordingHttp:
    """Answers each POST with one choice per candidate asked for; `takes_n=False` refuses n as
    a server limited to one choice does (a 400 on `n`)."""

    def __init__(self, *, takes_n: bool = True):
        self.takes_n = takes_n
        self.bodies: list[dict[str, Any]] = []

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert path == "/chat/completions"
        self.bodies.append(body)
        if body.get("n", 1) > 1 and not self.takes_n:
            raise ResponseError("n must be 1", code="invalid_value", param="n", status=400)
        seed = body.get("seed")
        choices = [
            {"index": i, "message": {"content": f"seed {None if seed is None else seed + i}"}}
            for i in range(body.get("n", 1))
        ]
        return {"choices": choices, "usage": {"prompt_tokens": 7, "completion_tokens": 3 * len(choices)}}


def asked(http: RecordingHttp) -> list[tuple[int | None, int | None]]:
    """(n, seed) of every request, in order."""
    return [(b.get("n"), b.get("seed")) for b in http.bodies]


async def generate(http: RecordingHttp, *, parallel: bool = True, seed: int | None = 10, model=None):
    source = ChatCandidates(http, model)  # type: ignore[arg-type]
    return await source.generate(
        MESSAGES, 3, temperature=0.7, max_tokens=32, seed=seed, parallel=parallel
    ), source


async def test_parallel_asks_once_with_n_and_the_first_seed():
    http = RecordingHttp()
    generation, source = await generate(http, model="qwen")
    assert asked(http) == [(3, 10)]
    assert http.bodies[0] == {
        "messages": MESSAGES, "temperature": 0.7, "max_tokens": 32, "n": 3, "seed": 10, "model": "qwen"
    }  # fmt: skip
    assert generation.method == "n" and source.supports_n is True
    assert generation.texts == ["seed 10", "seed 11", "seed 12"]


async def test_a_server_that_refuses_n_gets_one_request_per_candidate_with_its_own_seed():
    http = RecordingHttp(takes_n=False)
    generation, source = await generate(http)
    assert asked(http)[0] == (3, 10)
    assert sorted(asked(http)[1:], key=str) == [(None, 10), (None, 11), (None, 12)]
    assert generation.method == "concurrent" and source.supports_n is False
    assert generation.texts == ["seed 10", "seed 11", "seed 12"]


async def test_sequential_asks_one_by_one_with_the_same_seeds_as_parallel():
    http = RecordingHttp()
    generation, _ = await generate(http, parallel=False)
    assert asked(http) == [(None, 10), (None, 11), (None, 12)]
    assert "model" not in http.bodies[0]
    assert generation.method == "sequential"
    assert generation.texts == ["seed 10", "seed 11", "seed 12"]


async def test_without_a_seed_no_request_names_one():
    http = RecordingHttp(takes_n=False)
    await generate(http, seed=None)
    assert all("seed" not in body for body in http.bodies)
