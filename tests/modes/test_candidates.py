"""What `ChatCandidates` asks a server for: one request with n, or one request per candidate.

Candidate i must be sampled with seed + i on every path, so that the parallel and sequential
paths give the same candidates; the bodies are recorded from a stand-in for the HTTP client.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from whiz.client import ResponseError
from whiz.modes.candidates import ChatCandidates, Draw, ScriptedCandidates
from whiz.modes.candidates import generate as generate_all

MESSAGES = [{"role": "user", "content": "fix it"}]


class RecordingHttp:
    """Streams one choice per candidate asked for, as a chat server's chunks; `takes_n=False`
    refuses n as a server limited to one choice does (a 400 on `n`), `ignores_n` answers one
    choice whatever n says. `slow` holds back the choices it names until the stream is closed."""

    def __init__(self, *, takes_n: bool = True, ignores_n: bool = False, slow: tuple[int, ...] = ()):
        self.takes_n = takes_n
        self.ignores_n = ignores_n
        self.slow = slow
        self.bodies: list[dict[str, Any]] = []
        self.closed_early = 0

    async def stream(self, path: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        assert path == "/chat/completions"
        self.bodies.append(body)
        n = body.get("n", 1)
        if n > 1 and not self.takes_n:
            raise ResponseError("n must be 1", code="invalid_value", param="n", status=400)
        seed = body.get("seed")
        count = 1 if self.ignores_n else n
        try:
            for i in range(count):
                yield {"choices": [{"index": i, "delta": {"content": "seed "}, "finish_reason": None}]}
            for i in (i for i in range(count) if i not in self.slow):
                text = str(None if seed is None else seed + i)
                yield {"choices": [{"index": i, "delta": {"content": text}, "finish_reason": None}]}
                yield {
                    "choices": [{"index": i, "delta": {}, "finish_reason": "stop"}],
                    "whiz": {"decode_tokens": 3},
                }
            if self.slow:
                await asyncio.sleep(3600)
            yield {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3 * count}}
        except asyncio.CancelledError:
            self.closed_early += 1
            raise


def asked(http: RecordingHttp) -> list[tuple[int | None, int | None]]:
    """(n, seed) of every request, in order."""
    return [(b.get("n"), b.get("seed")) for b in http.bodies]


async def generate(
    http: RecordingHttp, *, parallel: bool = True, seed: int | None = 10, model=None, greedy_first=False
):
    source = ChatCandidates(http, model)  # type: ignore[arg-type]
    draw = Draw(3, 0.7, 32, seed=seed, parallel=parallel, greedy_first=greedy_first)
    return await generate_all(source, MESSAGES, draw), source


def temperatures(http: RecordingHttp) -> list[tuple[int | None, float]]:
    """(seed, temperature) of every request, by seed."""
    return sorted((b.get("seed"), b["temperature"]) for b in http.bodies)


async def test_parallel_asks_once_with_n_and_the_first_seed():
    http = RecordingHttp()
    generation, source = await generate(http, model="qwen")
    assert asked(http) == [(3, 10)]
    assert http.bodies[0] == {
        "messages": MESSAGES, "temperature": 0.7, "max_tokens": 32, "n": 3, "seed": 10, "model": "qwen",
        "stream_options": {"include_usage": True},
    }  # fmt: skip
    assert generation.method == "n" and source.supports_n is True
    assert generation.texts == ["seed 10", "seed 11", "seed 12"]
    assert generation.output_tokens == [3, 3, 3] and generation.prompt_tokens == 7
    assert generation.finish_reasons == ["stop"] * 3


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


async def test_greedy_first_asks_for_the_most_likely_reply_first_and_samples_the_rest():
    http = RecordingHttp()
    generation, _ = await generate(http, parallel=False, greedy_first=True)
    assert [(b.get("seed"), b["temperature"]) for b in http.bodies] == [(10, 0.0), (11, 0.7), (12, 0.7)]
    assert generation.texts == ["seed 10", "seed 11", "seed 12"]


async def test_greedy_first_in_parallel_is_one_greedy_request_beside_one_with_n_for_the_rest():
    http = RecordingHttp()
    generation, _ = await generate(http, greedy_first=True)
    assert sorted(asked(http), key=str) == [(2, 11), (None, 10)]
    assert temperatures(http) == [(10, 0.0), (11, 0.7)]
    assert generation.texts == ["seed 10", "seed 11", "seed 12"]


async def test_without_a_seed_no_request_names_one():
    http = RecordingHttp(takes_n=False)
    await generate(http, seed=None)
    assert all("seed" not in body for body in http.bodies)


async def test_a_server_that_ignores_n_gets_the_missing_candidates_as_single_requests():
    http = RecordingHttp(ignores_n=True)
    generation, source = await generate(http)
    assert asked(http)[0] == (3, 10)
    assert sorted(asked(http)[1:], key=str) == [(None, 11), (None, 12)]
    assert generation.method == "concurrent" and source.supports_n is False
    assert generation.texts == ["seed 10", "seed 11", "seed 12"]


async def test_candidates_come_as_each_finishes_and_leaving_early_closes_the_stream():
    http = RecordingHttp(slow=(0, 2))
    source = ChatCandidates(http)  # type: ignore[arg-type]
    async with source.stream(MESSAGES, Draw(3, 0.7, 32, seed=10)) as found:
        async for candidate in found:
            assert (candidate.index, candidate.text, candidate.output_tokens) == (1, "seed 11", 3)
            break  # as a heal does once a candidate passes
    assert http.closed_early == 1  # the server sees the connection go: it stops decoding
    generation = found.generation()
    assert generation.finish_reasons == ["cancelled", "stop", "cancelled"]
    assert generation.texts == ["seed ", "seed 11", "seed "]  # what was written before the stop


async def test_a_server_error_mid_stream_is_raised_to_the_reader():
    class Failing(RecordingHttp):
        async def stream(self, path, body):
            yield {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
            yield {"error": {"message": "engine failed", "code": "server_error"}}

    source = ChatCandidates(Failing())  # type: ignore[arg-type]
    with pytest.raises(ResponseError, match="engine failed"):
        await generate_all(source, MESSAGES, Draw(2, 0.7, 32))


async def test_scripted_candidates_finish_in_the_order_of_their_delays():
    source = ScriptedCandidates([["a", "b", "c"]], delays_s=[0.2, 0.0, 0.1])
    async with source.stream(MESSAGES, Draw(3, 0.7, 32)) as found:
        order = [c.text async for c in found]
    assert order == ["b", "c", "a"]


class LoopingHttp:
    """A server whose one candidate falls into a loop and would write it forever."""

    def __init__(self, first: str = "x = 1\n", again: str = "print(x)\n"):
        self.first, self.again = first, again
        self.lines_sent = 0
        self.closed = False

    async def stream(self, path: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {"choices": [{"index": 0, "delta": {"content": self.first}, "finish_reason": None}]}
            while self.lines_sent < 10_000:
                self.lines_sent += 1
                yield {"choices": [{"index": 0, "delta": {"content": self.again}, "finish_reason": None}]}
                await asyncio.sleep(0)
        finally:
            self.closed = True


async def test_a_candidate_caught_in_a_loop_ends_there_and_its_stream_is_closed():
    # A looping candidate decoded to its token limit cost a heal's ladder tens of seconds here.
    http = LoopingHttp()
    generation = await generate_all(
        ChatCandidates(http), MESSAGES, Draw(1, 0.7, 1024, seed=1, parallel=False)
    )  # type: ignore[arg-type]
    assert generation.texts == ["x = 1\nprint(x)\n"] and generation.finish_reasons == ["loop"]
    assert http.closed and http.lines_sent < 20  # the server was told to stop, not read to the end


async def test_a_candidate_looping_within_one_line_ends_there_too():
    http = LoopingHttp("notes = [", "'o|', ")
    generation = await generate_all(
        ChatCandidates(http), MESSAGES, Draw(1, 0.7, 1024, seed=1, parallel=False)
    )  # type: ignore[arg-type]
    assert generation.texts == ["notes = ['o|', "] and generation.finish_reasons == ["loop"]
    assert http.closed and http.lines_sent < 100
