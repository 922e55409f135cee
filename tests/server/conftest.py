"""Clients for the server tests, closed at teardown (pytest turns leaked sockets into errors)."""

from collections.abc import Callable, Iterator

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
