"""Catching a client's opening request: the client runs once, headless, against a stand-in server on
loopback that keeps every request body and answers each with an error, so the client stops at its
first model call. Nothing is generated and no tool of the client runs; what is kept is the client's
exact system prompt and tool list for this folder, which `warm.py` then sends to whiz to prefill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL_PATHS = ("/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1/completions")
"""The request paths that carry a model call; a client's other requests are answered and ignored."""
CAPTURE_TIMEOUT_S = 120.0
SETTLE_S = 2.0
"""After the first model call with tools, how long to wait for a larger one before stopping."""


@dataclass
class Captured:
    """A model call a client made: its path and body."""

    path: str
    body: dict[str, Any]

    @property
    def size(self) -> int:
        return len(json.dumps(self.body))

    @property
    def has_tools(self) -> bool:
        return bool(self.body.get("tools"))


@dataclass
class StandIn:
    """The stand-in server: a loopback port that keeps model calls and refuses them."""

    calls: list[Captured] = field(default_factory=list)
    first_tools_at: float | None = None

    def __post_init__(self) -> None:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                path = self.path.split("?", 1)[0]
                if any(path.endswith(p) for p in MODEL_PATHS):
                    try:
                        body = json.loads(raw or b"{}")
                    except ValueError:
                        body = None
                    if isinstance(body, dict):
                        stand_in.keep(Captured(path[path.index("/v1/") :], body))
                self._refuse()

            def do_GET(self) -> None:  # noqa: N802
                self._refuse(404)

            def _refuse(self, status: int = 400) -> None:
                error = {"type": "invalid_request_error", "message": "whiz setup: opening captured"}
                data = json.dumps({"type": "error", "error": error}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def keep(self, call: Captured) -> None:
        self.calls.append(call)
        if call.has_tools and self.first_tools_at is None:
            self.first_tools_at = time.monotonic()

    def opening(self) -> Captured | None:
        """The client's opening: its largest model call with tools (else its largest)."""
        with_tools = [c for c in self.calls if c.has_tools]
        return max(with_tools or self.calls, key=lambda c: c.size, default=None)

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def capture_opening(
    command: list[str],
    cwd: Path,
    env: dict[str, str],
    stand_in: StandIn,
    timeout_s: float = CAPTURE_TIMEOUT_S,
) -> Captured | None:
    """Run `command` (the client, configured for `stand_in`) in `cwd` until it has made its opening
    call (or exits, or `timeout_s` passes), then stop it; the opening, or None when it made none."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + timeout_s
    try:
        while process.poll() is None and time.monotonic() < deadline:
            seen = stand_in.first_tools_at
            if seen is not None and time.monotonic() - seen > SETTLE_S:
                break
            time.sleep(0.1)
    finally:
        if process.poll() is None:
            _stop(process)
    return stand_in.opening()


def _stop(process: subprocess.Popen) -> None:
    """End the client and whatever it started (its own process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue
