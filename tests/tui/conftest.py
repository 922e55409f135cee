"""Fixtures for the UI tests: a small project, a WHIZ_HOME, and `whiz code` in a pseudo-terminal."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.tui.terminal import Terminal

SCRIPTED = Path(__file__).with_name("scripted_code.py")
ORIGINAL = "def answer():\n    return 1\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text(ORIGINAL)
    return root


@pytest.fixture
def term_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "WHIZ_BASE_URL", "WHIZ_API_KEY")}
    env.update(TERM="xterm-256color", WHIZ_HOME=str(tmp_path / "home"), PYTHONUNBUFFERED="1")
    return env


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    yield started
    for term in started:
        term.close()


@pytest.fixture
def scripted(
    project: Path, term_env: dict[str, str], terminals: list[Terminal], tmp_path: Path
) -> Callable[..., Terminal]:
    """`scripted(replies, **env)`: `whiz code` over a ScriptedModel (scripted_code.py), ready for input."""

    def start(replies: list[dict], **env: str) -> Terminal:
        script = tmp_path / f"script{len(terminals)}.json"
        script.write_text(json.dumps(replies))
        term = Terminal([sys.executable, str(SCRIPTED), str(script)], project, {**term_env, **env})
        terminals.append(term)
        term.wait_for(r"·  /help")  # the status line: the UI is up
        return term

    return start


@pytest.fixture
def whiz_code(project: Path, term_env: dict[str, str], terminals: list[Terminal]) -> Callable[..., Terminal]:
    """`whiz_code(*args, **env)`: the real `whiz` command in a pseudo-terminal, in the project."""

    def start(*args: str, **env: str) -> Terminal:
        term = Terminal([sys.executable, "-m", "whiz", *args], project, {**term_env, **env})
        terminals.append(term)
        return term

    return start
