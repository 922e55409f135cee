"""Local `whiz serve` processes: engine replicas and gateways on loopback, for benchmarks and tests.

Each process writes its log to a file in `log_dir`; a process that dies or never answers its
health check is reported with the tail of that log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from whiz.errors import WhizError

KV_BYTES_PER_TOKEN = 12288
"""The default model's KV cache per token (24 layers x 2 KV heads x 64 dims x K and V x f16)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kv_budget_mb(slots: int, ctx: int, bytes_per_token: int = KV_BYTES_PER_TOKEN) -> int:
    """The --kv-budget-mb that buys `slots` conversations of `ctx` tokens."""
    return slots * ctx * bytes_per_token // (1024 * 1024) + 16


class LocalServer:
    """One `whiz serve` subprocess on a free loopback port."""

    def __init__(
        self,
        args: list[str],
        log_dir: Path,
        *,
        name: str,
        start_timeout_s: float = 300.0,
        env: dict[str, str] | None = None,
    ):
        """Start `whiz serve --port PORT *args`; `env` is added to this process's environment."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = name
        self.log = log_dir / f"{name}-{self.port}.log"
        command = [sys.executable, "-m", "whiz", "serve", "--port", str(self.port), *args]
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )
        self._start_timeout_s = start_timeout_s

    def wait_ready(self) -> None:
        """Block until /health answers; raises `WhizError` with the log's tail if it never does."""
        deadline = time.monotonic() + self._start_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise WhizError(f"{self.name} exited with status {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise WhizError(f"{self.name} did not answer /health in time:\n{self.tail()}")
            time.sleep(0.25)

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        """Die at once, as a crashed or powered-off replica does (SIGKILL: no clean shutdown)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class LocalCluster:
    """Engine replicas (`whiz serve --engine-only`) and gateways in front of them. A context manager."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.replicas: list[LocalServer] = []
        self.gateways: list[LocalServer] = []

    def start_replicas(self, n: int, args: Sequence[str]) -> list[LocalServer]:
        """Start `n` replicas at once (they load the model in parallel) and wait for all of them."""
        new = [LocalServer(["--engine-only", *args], self.log_dir, name=f"replica{i}") for i in range(n)]
        self.replicas += new
        for server in new:
            server.wait_ready()
        return new

    def start_gateway(self, routing: str, args: Sequence[str] = ()) -> LocalServer:
        """A gateway over every replica started so far."""
        upstreams = [a for r in self.replicas for a in ("--upstream", r.url)]
        name = f"gateway-{routing}"
        server = LocalServer([*upstreams, "--routing", routing, *args], self.log_dir, name=name)
        self.gateways.append(server)
        server.wait_ready()
        return server

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for server in [*self.gateways, *self.replicas]:
            server.stop()
