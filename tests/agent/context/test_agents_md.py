"""The starting AGENTS.md's facts: the test command and conventions a project's files state."""

from __future__ import annotations

import json
from pathlib import Path

from whiz.agent.context.agents_md import conventions, find_test_command, starting_agents_md
from whiz.agent.project.workspace import Workspace


def test_the_test_command_is_the_one_the_project_names(tmp_path: Path) -> None:
    assert find_test_command(tmp_path) is None
    (tmp_path / "test_app.py").write_text("def test_x():\n    pass\n")
    assert find_test_command(tmp_path) == "python -m pytest -q"
    (tmp_path / "go.mod").write_text("module example.com/x\n")
    assert find_test_command(tmp_path) == "go test ./..."
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "vitest run"}}))
    assert find_test_command(tmp_path) == "npm test"
    (tmp_path / "Makefile").write_text("all:\n\ttrue\n\ntest: all\n\tpytest\n")
    assert find_test_command(tmp_path) == "make test"


def test_npm_inits_placeholder_and_broken_files_name_no_command(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(
        json.dumps({"scripts": {"test": 'echo "Error: no test specified"'}})
    )
    (tmp_path / "pyproject.toml").write_text("[tool.pytest\nbroken")
    assert find_test_command(tmp_path) is None
    assert conventions(tmp_path)[-1].startswith("Make the smallest change")


def test_conventions_come_from_the_config_files(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 88\n[tool.mypy]\nstrict = true\n")
    (tmp_path / ".editorconfig").write_text("root = true\n")
    rules = "\n".join(conventions(tmp_path))
    assert "ruff" in rules and "88 characters" in rules and "mypy" in rules and ".editorconfig" in rules


def test_an_empty_folder_gets_a_start_that_says_what_is_missing(tmp_path: Path) -> None:
    text = starting_agents_md(Workspace(tmp_path))
    assert "(no files yet)" in text and "No test command was found" in text
    assert len(text) < 1200 * 4
