"""Shared fixtures: servers on the fake engine (fast) and on the real default model (marked `model`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from whiz.config import ServeSettings
from whiz.engine.fake import echo_script, fake_engine
from whiz.engine.scheduler import Scheduler
from whiz.server.app import create_app
from whiz.server.state import ServerState


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Served:
    """A running server: its base URL (…/v1), its state and its engine."""

    base_url: str
    root: str
    state: ServerState | None
    engine: Scheduler | None


class ServerThread:
    """uvicorn on a background thread, the way `whiz serve` runs it, on a free loopback port."""

    def __init__(self, app, port: int):
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="websockets-sansio")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def serve_fake() -> Iterator[Callable[..., Served]]:
    """Start a real HTTP/WebSocket server over the fake engine: `serve_fake(script=..., **settings)`."""
    started: list[tuple[ServerThread, Scheduler]] = []

    def start(
        script: Callable[[str], str] = echo_script, engine_kw: dict | None = None, **settings
    ) -> Served:
        engine = fake_engine(script, **(engine_kw or {}))
        app = create_app(engine, ServeSettings(model="fake", temperature=0, **settings))
        port = free_port()
        server = ServerThread(app, port)
        server.start()
        started.append((server, engine))
        root = f"http://127.0.0.1:{port}"
        return Served(f"{root}/v1", root, app.state.whiz, engine)

    yield start
    for server, engine in started:
        server.stop()
        engine.close()


@pytest.fixture(scope="session")
def real_server() -> Iterator[Served]:
    """`whiz serve` with the default model, in a subprocess, for the whole session."""
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"whiz-test-server-{port}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "whiz",
                "serve",
                "--port",
                str(port),
                "--slots",
                "8",
                "--ctx",
                "16384",
                "--kv-budget-mb",
                "1536",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"whiz serve exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{root}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"whiz serve did not come up:\n{log.read_text()}")
            time.sleep(0.25)
        yield Served(f"{root}/v1", root, None, None)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
