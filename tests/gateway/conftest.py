"""Fixtures: fake upstreams and real gateways, each a real server on a loopback port."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import ServerThread, free_port
from whiz.commands.serve import build_app
from whiz.config import ServeSettings
from whiz.gateway import Gateway, build_gateway
from whiz.gateway.fake import FakeUpstream


@dataclass
class FakeServed:
    fake: FakeUpstream
    url: str
    server: ServerThread


@dataclass
class GatewayServed:
    base_url: str
    root: str
    gateway: Gateway


@pytest.fixture
def upstreams() -> Iterator[Callable[..., FakeServed]]:
    """`upstreams(**FakeUpstream options)`: a fake OpenAI-compatible server on a free port."""
    started: list[ServerThread] = []

    def start(**options) -> FakeServed:
        fake = FakeUpstream(**options)
        port = free_port()
        server = ServerThread(fake.app(), port)
        server.start()
        started.append(server)
        return FakeServed(fake, f"http://127.0.0.1:{port}", server)

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def gateway() -> Iterator[Callable[..., GatewayServed]]:
    """`gateway(urls, **settings)`: `whiz serve --upstream ...` on a free port."""
    started: list[ServerThread] = []

    def start(urls: list[str], **settings) -> GatewayServed:
        options = {"temperature": 0, "health_interval_s": 0.2, "upstream_timeout_s": 5.0, **settings}
        config = ServeSettings(upstreams=urls, **options)
        gw = build_gateway(config)
        app = build_app(gw, config)
        port = free_port()
        server = ServerThread(app, port, config)
        server.start()
        started.append(server)
        root = f"http://127.0.0.1:{port}"
        return GatewayServed(f"{root}/v1", root, gw)

    yield start
    for server in started:
        server.stop()
