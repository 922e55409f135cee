"""Warm `whiz serve`s in the background, one per model, shared by every whiz command.

`whiz exec`, `code`, `heal` and `swarm` with no server to talk to start one here instead of loading
the model in their own process: detached (its own session, so it outlives the command that started
it), on a free loopback port, logging to `$WHIZ_HOME/server/<model>.log`, and exiting by itself
after an idle time. The next command finds it through `$WHIZ_HOME/server/<model>.json` and starts
its first turn warm: the model is loaded and the prefixes it has seen are cached.

The deep model (the 1.5B, with the 0.5B drafting) gets one of its own beside the fast one, started
the first time a session needs it (`modes.pool`), so that auto mode's better path needs no flags.

`whiz serve status` lists them and `whiz serve stop` ends them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from whiz.environments.processes import alive
from whiz.errors import WhizError

IDLE_EXIT_S = 15 * 60
"""How long a background server waits for a request before it exits (`--idle-exit`)."""
START_TIMEOUT_S = 300.0
"""How long a start may take: loading the model, and the first start's batch timings."""
STOP_GRACE_S = 10.0


@dataclass
class Running:
    """A background server, as its state file records it."""

    model: str
    pid: int
    url: str
    log: str
    started_at: float
    idle_exit_s: float


class BackgroundServers:
    """The background servers of one whiz home, one per model."""

    def __init__(self, home: Path):
        self.folder = Path(home) / "server"

    def find(self, model: str) -> Running | None:
        """The running server for `model` that answers /health, or None (a dead one's state is removed)."""
        state = self._state(model)
        try:
            running = Running(**json.loads(state.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        if alive(running.pid) and _healthy(running.url):
            return running
        if not alive(running.pid):
            state.unlink(missing_ok=True)
        return None

    def all(self) -> list[Running]:
        """Every background server that answers, by model."""
        found = []
        for state in sorted(self.folder.glob("*.json")):
            with contextlib.suppress(OSError, ValueError, TypeError):
                model = json.loads(state.read_text())["model"]
                if (running := self.find(model)) is not None:
                    found.append(running)
        return found

    def start(
        self,
        model: str,
        *,
        idle_exit_s: float = IDLE_EXIT_S,
        timeout_s: float = START_TIMEOUT_S,
        env: dict[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> Running:
        """The server for `model`, started now unless one already runs (two commands starting at
        once get the same one), with `whiz serve`'s `args` besides (the deep model's
        `--draft-model`, say). Raises `WhizError` with the log's tail when it does not come up."""
        with self._lock():
            if (running := self.find(model)) is not None:
                return running
            port = _free_port()
            log = self.folder / f"{_slug(model)}.log"
            command = [sys.executable, "-m", "whiz", "serve", "--model", model, "--host", "127.0.0.1"]
            command += ["--port", str(port), "--idle-exit", str(idle_exit_s), *args]
            # The agent's defaults: greedy unless a request says otherwise.
            env = {**os.environ, "WHIZ_TEMPERATURE": "0", "PYTHONUNBUFFERED": "1", **(env or {})}
            pid = _spawn_detached(command, log, env)
            running = Running(model, pid, f"http://127.0.0.1:{port}", str(log), time.time(), idle_exit_s)
            _wait_ready(running, timeout_s)
            _write_atomic(self._state(model), json.dumps(asdict(running)))
            return running

    def stop(self, model: str | None = None) -> list[Running]:
        """Stop the server for `model` (all of them when None); returns those stopped."""
        stopped = []
        for running in self.all() if model is None else [r for r in [self.find(model)] if r]:
            _terminate(running.pid)
            self._state(running.model).unlink(missing_ok=True)
            stopped.append(running)
        return stopped

    def _state(self, model: str) -> Path:
        return self.folder / f"{_slug(model)}.json"

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "start.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _slug(model: str) -> str:
    """A file name for a model name or path."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")[:100] or "model"


def _healthy(url: str) -> bool:
    try:
        # Our own loopback server over plain http: no certificate store to load (~40 ms).
        return httpx.get(url + "/health", timeout=2.0, verify=False).status_code == 200
    except httpx.HTTPError:
        return False


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_LAUNCH = """\
import json, subprocess, sys
with open(sys.argv[2], "ab") as out:
    server = subprocess.Popen(json.loads(sys.argv[1]), stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT, start_new_session=True)
print(server.pid)
"""


def _spawn_detached(command: list[str], log: Path, env: dict[str, str]) -> int:
    """Start `command` as a daemon and return its pid: through a launcher that exits at once, so
    the server is nobody's child here (init reaps it) and has a session of its own (the terminal's
    Ctrl-C and this command's exit leave it running)."""
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCH, json.dumps(command), str(log)],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    try:
        return int(done.stdout.strip())
    except ValueError:
        raise WhizError(f"could not start a background server: {done.stderr.strip()[-500:]}") from None


def _wait_ready(running: Running, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not _healthy(running.url):
        if not alive(running.pid) or time.monotonic() > deadline:
            if alive(running.pid):
                _terminate(running.pid)
            tail = _tail(Path(running.log))
            raise WhizError(
                f"the background server for {running.model} did not start (log: {running.log})\n{tail}"
            )
        time.sleep(0.1)


def _terminate(pid: int, wait: Callable[[float], None] = time.sleep) -> None:
    """SIGTERM, then SIGKILL after a grace period; returns once the process is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while alive(pid) and time.monotonic() < deadline:
        wait(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _write_atomic(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
