"""Shared fixtures: servers on the fake engine (fast) and on the real default model (marked `model`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from whiz.commands.serve import build_app
from whiz.config import ServeSettings
from whiz.engine.fake import echo_script, fake_engine
from whiz.engine.scheduler import Scheduler
from whiz.errors import WhizError
from whiz.gateway.local import LocalServer, free_port
from whiz.models.store import default_home
from whiz.server.background import BackgroundServers
from whiz.server.listen import uvicorn_config
from whiz.server.state import ServerState


@dataclass
class Served:
    """A running server: its base URL (…/v1), its state and its engine."""

    base_url: str
    root: str
    state: ServerState | None
    engine: Scheduler | None
    uvicorn: uvicorn.Server | None = None
    """The in-process server (for tests that reach its connections), when there is one."""


class ServerThread:
    """uvicorn on a background thread, the way `whiz serve` runs it, on a free loopback port."""

    def __init__(self, app, port: int, settings: ServeSettings | None = None):
        # A request a test left hanging (a fake upstream told to hang) is cancelled a second into
        # shutdown, not waited for until the join below gives up. The connection limits are
        # those `whiz serve` runs with.
        settings = settings or ServeSettings()
        state = getattr(getattr(app, "state", None), "whiz", None)
        config = uvicorn_config(
            app, settings, state, host="127.0.0.1", port=port, timeout_graceful_shutdown=1
        )
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


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist's workers start with COLUMNS=80 and LINES=24 set, which a serial run does not
    have: without them output that follows the terminal's width is as wide in both.

    pytest 9.2 reads a node id that pytest-xdist (3.8) does not set for `--dist loadgroup`, so the
    real-model tests would not be grouped (see `pytest_collection_finish`): refuse that pair with
    the reason, before any worker starts."""
    if config.getoption("dist", default="no") == "loadgroup" and not os.environ.get("PYTEST_XDIST_WORKER"):
        major, minor = (int(part) for part in pytest.__version__.split(".")[:2])
        if (major, minor) >= (9, 2):
            raise pytest.UsageError(
                f"pytest {pytest.__version__} breaks pytest-xdist's --dist loadgroup (the real-model "
                "tests would run side by side on every worker): install pyproject.toml's pytest<9.2"
            )
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)


SECOND_MODEL_GROUP = (
    "tests/integration/test_agent_real.py",
    "tests/integration/test_codex.py",
    "tests/integration/test_batch_invariance.py",
    "tests/integration/test_candidates_real.py",
    "tests/integration/test_decode_step_real.py",
    "tests/integration/test_real_model.py",
    "tests/integration/test_prefix_cache_real.py",
    "tests/mcp/",
    "tests/clients/",
    "tests/web/",
    "tests/completion/",
    "tests/gateway/",
    "tests/server/",
    "tests/tui/",
)
"""The real-model tests of group `model-b`, by file or folder; the rest are in group `model`. The
two take about as long (by `--durations` on a quiet 2-core machine): keep them even when a slow
real-model test is added."""


def model_group(nodeid: str) -> str:
    """The pytest-xdist group of a real-model test."""
    return "model-b" if nodeid.startswith(SECOND_MODEL_GROUP) else "model"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`make test` runs `-n 4 --dist loadgroup`) the tests on the real model
    run in two groups, each on one worker, one test after another, against that worker's one
    `real_server` on one llama.cpp thread (`model_threads`): one core each, the way llama.cpp
    uses a core best, while the other workers take the rest of the suite, which mostly waits on
    sockets, subprocesses and timers. One group alone would leave a core idle for minutes."""
    for item in items:
        if item.get_closest_marker("model") is not None:
            item.add_marker(pytest.mark.xdist_group(model_group(item.nodeid)))


def model_threads() -> int | None:
    """llama.cpp threads for the real model in a test (None: llama.cpp's default, all cores).

    Under pytest-xdist the real-model tests run beside workers that keep the cores busy, and
    llama.cpp's threads wait for each other at every operation of a step by spinning: with two
    threads on two shared cores one spins while the other waits for a core (0.5B decode beside one
    busy process: 8.8 tok/s on two threads, 14.8 on one; quiet: 26.6 and 16.0). So there every
    llama.cpp a real-model test starts gets one thread: `real_server` and in-process engines
    through this, the servers `whiz exec` and other commands start through `WHIZ_THREADS` (set
    below). A serial run keeps the default. `WHIZ_THREADS`, if the caller set it, wins."""
    if value := os.environ.get("WHIZ_THREADS"):
        return int(value)
    return 1 if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 else None


@pytest.fixture(autouse=True)
def _model_threads_for_the_commands_a_test_starts(request: pytest.FixtureRequest, monkeypatch) -> None:
    """`WHIZ_THREADS` for the real-model tests' subprocesses, as `model_threads()` says."""
    if request.node.get_closest_marker("model") is not None and (threads := model_threads()):
        monkeypatch.setenv("WHIZ_THREADS", str(threads))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under `--dist loadgroup` pytest-xdist groups a test by a suffix on its node id. Where a
    pytest and pytest-xdist pair lose it, the real-model tests would each load the model on every
    worker and run side by side, several times slower: stop at once and say why."""
    if not session.config.getoption("loadgroup", default=False):
        return
    ungrouped = [i.nodeid for i in session.items if i.get_closest_marker("model") and "@" not in i.nodeid]
    if ungrouped:
        raise pytest.UsageError(
            f"pytest-xdist did not group the real-model tests (e.g. {ungrouped[0]}): pytest "
            f"{pytest.__version__} with this pytest-xdist; install the versions pyproject.toml names"
        )


@pytest.fixture(scope="session", autouse=True)
def no_background_servers_left() -> Iterator[None]:
    """A test that runs `whiz exec` with no server starts the warm background server (as a user's
    would): stop it when the suite ends, so no server outlives the test run."""
    yield
    BackgroundServers(default_home()).stop()


@pytest.fixture
def serve_fake() -> Iterator[Callable[..., Served]]:
    """Start a real HTTP/WebSocket server over the fake engine: `serve_fake(script=..., **settings)`."""
    started: list[tuple[ServerThread, Scheduler]] = []

    def start(
        script: Callable[[str], str] = echo_script, engine_kw: dict | None = None, **settings
    ) -> Served:
        engine = fake_engine(script, **(engine_kw or {}))
        config = ServeSettings(model="fake", temperature=0, **settings)
        app = build_app(engine, config)
        port = free_port()
        server = ServerThread(app, port, config)
        server.start()
        started.append((server, engine))
        root = f"http://127.0.0.1:{port}"
        return Served(f"{root}/v1", root, app.state.whiz, engine, server.server)

    yield start
    for server, engine in started:
        server.stop()
        engine.close()


REAL_SERVE_ARGS = ("--slots", "8", "--ctx", "16384", "--kv-budget-mb", "1536")
"""The shared real server's room: Codex's ~6k-token prompt, and healing's candidates side by side."""


@contextmanager
def whiz_serve(
    args: Sequence[str], *, log_dir: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[LocalServer]:
    """`whiz serve *args` in a subprocess on a free port, until the block ends.

    A server that exits or never answers /health fails the test, with the tail of its log.
    """
    log_dir = log_dir or Path(os.environ.get("TMPDIR", "/tmp"))
    server = LocalServer(list(args), log_dir, name="whiz-test-server", start_timeout_s=180, env=env)
    try:
        try:
            server.wait_ready()
        except WhizError as exc:
            pytest.fail(exc.message)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def real_server(tmp_path_factory) -> Iterator[Served]:
    """`whiz serve` with the default model, in a subprocess, shared by the whole session.

    Tests that use it keep to their own sessions and prompts. Tests that need other flags
    start their own with `whiz_serve` (the web app's, with a workspace and an API key).
    Its prefix cache starts empty: a first turn is cold in every run, as the tests expect.
    """
    kv = tmp_path_factory.mktemp("prefix-cache")
    threads = ("--threads", str(t)) if (t := model_threads()) else ()
    with whiz_serve((*REAL_SERVE_ARGS, *threads, "--prefix-cache-dir", str(kv))) as server:
        yield Served(f"{server.url}/v1", server.url, None, None)
