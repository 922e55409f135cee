"""The background server whiz commands share: found again by the next command, gone when idle."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from whiz.server.background import BackgroundServers


def test_a_background_server_is_found_again_and_exits_when_idle(tmp_path: Path) -> None:
    servers = BackgroundServers(tmp_path / "home")
    started = servers.start("fake", idle_exit_s=2)
    try:
        assert servers.start("fake").pid == started.pid  # a second start finds the running one
        assert servers.find("fake") == started
        # Requests keep it; /health probes (how `find` looks) do not count as use.
        for _ in range(3):
            time.sleep(1)
            body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
            assert httpx.post(started.url + "/v1/chat/completions", json=body, timeout=10).status_code == 200
        deadline = time.monotonic() + 20
        while servers.find("fake") is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert servers.find("fake") is None and servers.all() == []
        assert "idle for 2 s: exiting" in Path(started.log).read_text()
    finally:
        servers.stop()


def test_a_server_that_cannot_start_says_why_with_its_log(tmp_path: Path) -> None:
    servers = BackgroundServers(tmp_path / "home")
    try:
        servers.start("no-such-model-anywhere", timeout_s=60)
    except Exception as exc:  # WhizError
        assert "did not start" in str(exc) and "no-such-model-anywhere" in str(exc)
    else:
        raise AssertionError("expected the start to fail")
    assert servers.all() == []
