"""Fixtures for the web app's tests.

Fast ones: apps over the fake engine with a fixture workspace, driven through Starlette's TestClient.
End-to-end ones (marker `model`): a real `whiz serve` with the default model, and the page in
Debian's headless Chromium through Playwright.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright
from starlette.testclient import TestClient

from whiz.commands.serve import build_app
from whiz.config import ServeSettings
from whiz.engine.fake import echo_script, fake_engine
from whiz.models import ModelStore, default_home
from whiz.web.headless import CHROMIUM, launch_chromium

from ..conftest import whiz_serve

# The host a browser on this machine would send; TestClient's default "testserver" is not loopback.
BASE_URL = "http://127.0.0.1:8321"
ORIGIN = "http://127.0.0.1:8321"

CALC = "def add(a, b):\n    return a + b\n\n\ndef greet(name):\n    print('hello ' + name)\n"


def whole_file_reply(path: str, content: str) -> Callable[[str], str]:
    """A fake model that answers every request by rewriting `path` as `content`."""
    return lambda conversation: f"{path}\n```python\n{content}```"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    (root / "pkg").mkdir()
    (root / "pkg" / "util.py").write_text("X = 1\n")
    (root / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    return root


@pytest.fixture
def make_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., TestClient]]:
    """`make_client(script=..., **settings)`: a TestClient over a fresh app on the fake engine."""
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path / "home"))  # undo snapshots go here
    made: list[tuple[TestClient, object]] = []

    def make(script: Callable[[str], str] = echo_script, **settings) -> TestClient:
        engine = fake_engine(script)
        app = build_app(engine, ServeSettings(model="fake", temperature=0, **settings))
        client = TestClient(app, base_url=BASE_URL)
        client.__enter__()
        made.append((client, engine))
        return client

    yield make
    for client, engine in made:
        client.__exit__(None, None, None)
        engine.close()


# -- a real `whiz serve` with a workspace, and Debian's Chromium driven by Playwright (marker `model`) --

WEB_KEY = "web-test-key"
FIXTURE_CALC = (
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n"
    'def greet(name):\n    print("hello " + name)\n'
)

FIXTURE_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


@dataclass
class WebServer:
    """A running `whiz serve --workspace`: the page's URL, the workspace folder, the API key."""

    url: str
    workspace: Path
    key: str


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """`whiz serve` with the default model, a fixture workspace, a test command and an API key."""
    model = ModelStore(default_home()).path("qwen2.5-coder-0.5b")
    if model is None:
        pytest.fail("the default model is not installed; run `make model`")
    root = tmp_path_factory.mktemp("web")
    workspace = root / "project"
    workspace.mkdir()
    (workspace / "calc.py").write_text(FIXTURE_CALC)
    (workspace / "test_calc.py").write_text(FIXTURE_TEST)
    # Undo snapshots go to a WHIZ_HOME of the test's own; the model is named by its path.
    args = ["--model", str(model), "--slots", "4", "--ctx", "4096", "--kv-budget-mb", "512"]
    args += ["--api-key", WEB_KEY, "--workspace", str(workspace)]
    args += ["--test-cmd", f"{sys.executable} -m pytest -q -p no:cacheprovider"]
    with whiz_serve(args, log_dir=root, env={"WHIZ_HOME": str(root / "home")}) as server:
        yield WebServer(server.url + "/", workspace, WEB_KEY)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """Headless Chromium with a fresh profile."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing; `make test` installs it (apt-get install chromium)")
    with sync_playwright() as pw:
        context = launch_chromium(pw, tmp_path_factory.mktemp("chromium-profile"))
        yield context
        context.close()


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Page]:
    """A new tab; fails the test on any uncaught error in the page's scripts."""
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.set_default_timeout(30_000)
    yield tab
    tab.close()
    assert not errors, errors
