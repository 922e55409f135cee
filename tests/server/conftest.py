"""Clients for the server tests, closed at teardown (pytest turns leaked sockets into errors)."""

import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from openai import OpenAI


@pytest.fixture
def sdk() -> Iterator[Callable[..., OpenAI]]:
    """`sdk(served, api_key="x")`: an openai SDK client for a served app, without retries."""
    clients: list[OpenAI] = []

    def make(served, api_key: str = "x", **kw) -> OpenAI:
        client = OpenAI(base_url=served.base_url, api_key=api_key, max_retries=0, **kw)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def leave_a_stream() -> Callable[..., tuple[int, int]]:
    """`leave_a_stream(served, n)`: stream a long chat completion of `n` candidates (None: no `n`),
    read a few chunks of each, hang up, and wait up to 2 s for the engine to stop. Returns how
    many sequences were decoding before hanging up and how many still are after."""

    def leave(served, n: int | None = None) -> tuple[int, int]:
        body = {"model": "fake", "messages": [{"role": "user", "content": "go"}], "stream": True}
        if n is not None:
            body["n"] = n
        each = n or 1
        with (
            httpx.Client() as http,
            http.stream("POST", f"{served.base_url}/chat/completions", json=body) as r,
        ):
            lines = r.iter_lines()
            data = sum(
                1 for _, line in zip(range(4 * each + 1), lines, strict=False) if line.startswith("data: ")
            )
            assert data >= 2 * each  # every candidate is under way
            decoding = served.engine.status()["active"]
        deadline = time.monotonic() + 2
        while served.engine.status()["active"] and time.monotonic() < deadline:
            time.sleep(0.01)
        return decoding, served.engine.status()["active"]

    return leave
