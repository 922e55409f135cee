"""SIGTERM drains: the listening socket stays open and new requests get a 503 with Retry-After
while running ones finish or are cancelled, and the server exits within its promise (its grace
and a margin, which it enforces itself: past them it logs 'overran' and exits with status 1), with
the real model and a client reading a stream as well as on the fake one."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from tests.conftest import REAL_SERVE_ARGS
from whiz.gateway.local import LocalServer
from whiz.server import listen

from .test_websocket import wait_for


class Reader:
    """A client streaming a long reply on a thread, reading every chunk as it comes."""

    def __init__(self, url: str, body: dict):
        self.chunks = 0
        self.outcome: object = None
        self._thread = threading.Thread(target=self._read, args=(url, body), daemon=True)
        self._thread.start()

    def _read(self, url: str, body: dict) -> None:
        try:
            with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=60) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {"):
                        self.chunks += 1
            self.outcome = "ended"
        except httpx.HTTPError as exc:
            self.outcome = exc

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout=timeout_s)


def sigterm_while_reading(server: LocalServer, body: dict) -> httpx.Response | None:
    """SIGTERM while a client reads a stream; the answer to a request sent just after the signal.
    The process exited within its promise: cleanly, not by its own deadline."""
    reader = Reader(server.url, {**body, "stream": True})
    assert wait_for(lambda: reader.chunks > 2, timeout_s=120), "the stream never started"
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)  # uvicorn notices the signal within 0.1 s
    try:
        during = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=5)
    except httpx.HTTPError:
        during = None
    code = server.proc.wait(timeout=30)
    assert_exited_within_the_grace(server, code)
    reader.join(timeout_s=10)
    assert reader.outcome is not None, "the reading client was left waiting"
    return during


def assert_exited_within_the_grace(server: LocalServer, code: int) -> None:
    """Past its grace and margin the server ends itself with status 1 and says it overran (see
    `test_a_drain_that_overruns_its_grace_ends_the_process`): any other end came within them."""
    assert code in (0, -signal.SIGTERM), f"exit {code}:\n{server.tail()}"
    assert "overran" not in server.tail()


def assert_refused_with_retry_after(during: httpx.Response | None) -> None:
    assert during is not None, "a request during the drain found the socket closed"
    assert during.status_code == 503, during.text
    assert during.headers.get("retry-after")
    assert during.json()["error"]["code"] == "server_unavailable"


LONG_CHAT = {
    "model": "fake",
    "messages": [{"role": "user", "content": "x" * 6000}],
    "whiz": {"speculation": False},
}


def test_sigterm_answers_503_while_it_drains_then_exits(tmp_path: Path):
    server = LocalServer(
        ["--model", "fake", "--engine-only"], tmp_path, name="whiz-drain", start_timeout_s=60
    )
    try:
        server.wait_ready()
        during = sigterm_while_reading(server, LONG_CHAT)
        assert_refused_with_retry_after(during)
    finally:
        server.stop()


def test_a_drain_ends_as_soon_as_nothing_runs(tmp_path: Path):
    server = LocalServer(
        ["--model", "fake", "--engine-only", "--shutdown-grace-s", "60"],
        tmp_path,
        name="whiz-drain-idle",
        start_timeout_s=60,
    )
    try:
        server.wait_ready()
        server.proc.send_signal(signal.SIGTERM)
        # Nothing was running, so it does not sit out the 60 s of grace (past which it would end
        # itself with exit 1): a clean shutdown long before that, which ends as the signal asked
        # (uvicorn re-raises SIGTERM once it has shut down, so a supervisor sees -15).
        code = server.proc.wait(timeout=30)
        assert code in (0, -signal.SIGTERM), f"exit {code}:\n{server.tail()}"
        assert "overran" not in server.tail()
    finally:
        server.stop()


def test_a_drain_that_overruns_its_grace_ends_the_process(monkeypatch, caplog):
    # The promise the tests above rely on: a drain past its grace and margin does not go on.
    ended: list[int] = []
    monkeypatch.setattr(listen.os, "_exit", ended.append)
    monkeypatch.setattr(listen.logging, "shutdown", lambda: None)  # pytest's own handlers stay
    config = uvicorn.Config("whiz:nothing", log_config=None, timeout_graceful_shutdown=0)
    server = listen.DrainingServer(config, None)
    server.handle_exit(signal.SIGTERM, None)
    assert wait_for(lambda: ended, timeout_s=listen.EXIT_MARGIN_S + 30), "nothing ended the drain"
    assert ended == [1] and "overran its grace" in caplog.text


@pytest.mark.model
def test_sigterm_with_the_real_model_and_a_reading_client_exits_within_5_s(tmp_path: Path):
    server = LocalServer(list(REAL_SERVE_ARGS), tmp_path, name="whiz-drain-real", start_timeout_s=300)
    try:
        server.wait_ready()
        body = {
            "messages": [{"role": "user", "content": "Write a long Python module with many classes."}],
            "max_tokens": 4000,
        }
        during = sigterm_while_reading(server, body)
        assert_refused_with_retry_after(during)
    finally:
        server.stop()
