"""Apps over the fake engine with a fixture workspace, driven through Starlette's TestClient."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from whiz.config import ServeSettings
from whiz.engine.fake import echo_script, fake_engine
from whiz.server.app import create_app

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
        app = create_app(engine, ServeSettings(model="fake", temperature=0, **settings))
        client = TestClient(app, base_url=BASE_URL)
        client.__enter__()
        made.append((client, engine))
        return client

    yield make
    for client, engine in made:
        client.__exit__(None, None, None)
        engine.close()
