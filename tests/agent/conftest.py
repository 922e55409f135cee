"""Fixtures for the agent's tests: a small project folder and an agent over a scripted model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from whiz.agent.approvals import Approvals
from whiz.agent.config import AgentConfig
from whiz.agent.editing.undo import UndoStore
from whiz.agent.events import Collector
from whiz.agent.loop import Agent
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.agent.project.workspace import Workspace
from whiz.agent.store.sessions import SessionStore

GREET = """def say_hello(name):
    return "Hello, " + name


def main():
    print(say_hello("world"))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "greet.py").write_text(GREET)
    (root / "README.md").write_text("A tiny project.\n")
    return root


def turn_statuses(project: Path) -> list[str]:
    """The statuses of the turns the session log holds for `project`'s one session (the log is in
    the `home` folder next to `project`)."""
    store = SessionStore(project.parent / "home" / "sessions.db")
    try:
        (info,) = store.list(project)
        return [t.status for t in store.turns(info.id)]
    finally:
        store.close()


def sr(path: str, search: str, replace: str) -> str:
    """A SEARCH/REPLACE block as a model writes it."""
    return f"{path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


class Harness:
    """An agent over a scripted model, its events and (optionally) undo."""

    def __init__(self, root: Path, replies: list, undo_dir: Path | None = None, approvals=None, **config):
        self.model = ScriptedModel(list(replies))
        self.events = Collector()
        self.undo = UndoStore(undo_dir) if undo_dir else None
        # The scripted edits here rename say_hello without its callers: checking them is
        # test_checks.py's business, not every test's. The scripted model makes the renames its
        # tests ask for: the exact one (`editing/rename.py`) is test_rename.py's.
        cfg = AgentConfig(**{"check_edits": False, "exact_renames": False, **config})
        approvals = approvals or Approvals(cfg.approval, preapproved=[cfg.test_cmd or ""])
        self.agent = Agent(
            self.model, Workspace(root), config=cfg, sink=self.events, approvals=approvals, undo=self.undo
        )


@pytest.fixture
def harness(project: Path, tmp_path: Path) -> Callable[..., Harness]:
    def make(replies: list, **config) -> Harness:
        return Harness(project, replies, tmp_path / "undo", **config)

    return make
