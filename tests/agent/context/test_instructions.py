"""The project's AGENTS.md files in the model's instructions: read from the repository's top down to
the working folder (nearest last), cut to a budget with a notice, listed, and read by the secret
rules like any other file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.agent.conftest import Harness
from whiz.agent.context.instructions import fair_shares, read_instructions
from whiz.agent.project.workspace import Workspace

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository (its top has `.git`) with the working folder two levels down."""
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    work = top / "services" / "api"
    work.mkdir(parents=True)
    (work / "app.py").write_text("def handler():\n    return 1\n")
    return top


def harness(work: Path, replies: list, **config) -> Harness:
    return Harness(work, replies, **config)


async def test_the_files_from_the_top_down_reach_the_model_nearest_last(repo: Path) -> None:
    work = repo / "services" / "api"
    (repo / "AGENTS.md").write_text("Top rule: use tabs.\n")
    (repo / "services" / "CLAUDE.md").write_text("Services rule: log every request.\n")
    (work / "AGENTS.md").write_text("API rule: return JSON.\n")
    (work / "CLAUDE.md").write_text("Never shown: AGENTS.md is in this folder.\n")
    h = harness(work, ["Nothing to change."])
    await h.agent.run("What does app.py do?")
    prompt = h.model.requests[0].instructions
    top, middle, near = (prompt.index(rule) for rule in ("Top rule", "Services rule", "API rule"))
    assert top < middle < near, "the top's file first, the working folder's last"
    assert prompt.rstrip().endswith("API rule: return JSON."), "nearest the task, after the map"
    assert "Never shown" not in prompt
    files = h.agent.project.item()["files"]
    assert [f["path"] for f in files] == ["../../AGENTS.md", "../CLAUDE.md", "AGENTS.md"]
    assert not h.agent.project.cut and not h.agent.project.warnings


async def test_long_files_are_cut_to_the_budget_and_the_model_is_told(repo: Path) -> None:
    work = repo / "services" / "api"
    (repo / "AGENTS.md").write_text("Short top rule.\n")
    long_lines = "".join(f"Rule {i}: keep function {i} small and well named.\n" for i in range(200))
    (work / "AGENTS.md").write_text(long_lines)
    h = harness(work, ["Nothing to change."], instructions_tokens=300)
    await h.agent.run("What does app.py do?")
    prompt = h.model.requests[0].instructions
    assert "Short top rule." in prompt, "a short file keeps all of its text"
    assert "Rule 0:" in prompt and "Rule 199:" not in prompt
    assert "[The rest of AGENTS.md, about" in prompt and "was cut" in prompt
    item = h.agent.project.item()
    assert item["cut"] and item["budget_tokens"] == 300
    near = item["files"][-1]
    assert near["cut"] and near["shown_tokens"] < near["tokens"]
    assert sum(f["shown_tokens"] for f in item["files"]) <= 300
    block = prompt[prompt.index("The project's instructions") :]
    assert len(block) < 300 * 4 + 400, "the files' text keeps to the budget (about 4 characters a token)"


def test_shares_are_equal_and_a_short_file_leaves_its_rest_to_the_others() -> None:
    assert fair_shares([100, 5000, 5000], 1000) == [100, 450, 450]
    assert fair_shares([10, 20], 1000) == [10, 20]
    assert sum(fair_shares([700, 900, 3000, 50], 1200)) <= 1200


def test_outside_a_repository_only_the_working_folder_is_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("A stranger's rules above the project.\n")
    work = tmp_path / "project"
    work.mkdir()
    (work / "AGENTS.md").write_text("The project's own rules.\n")
    found = read_instructions(Workspace(work))
    assert [f.path for f in found.files] == ["AGENTS.md"]


def test_a_budget_of_zero_reads_none(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("Top rule.\n")
    assert read_instructions(Workspace(repo), 0).files == []


def test_files_the_secret_rules_keep_out_get_a_warning_not_a_crash(repo: Path) -> None:
    work = repo / "services" / "api"
    (work / ".env").write_text("API_TOKEN=tok_9f8e7d6c5b4a39281706\n")
    # The working folder's AGENTS.md is a link to the secret file; the middle one holds a key;
    # the top one quotes the token's value, which is masked.
    (work / "AGENTS.md").symlink_to(work / ".env")
    (repo / "services" / "AGENTS.md").write_text("Deploy with this key:\n" + KEY)
    (repo / "AGENTS.md").write_text("Call the API with tok_9f8e7d6c5b4a39281706 in tests.\n")
    found = read_instructions(Workspace(work))
    assert [f.path for f in found.files] == ["../../AGENTS.md"]
    assert "tok_9f8e7d6c5b4a39281706" not in found.render()
    assert "Call the API with" in found.render()
    warnings = " ".join(found.warnings)
    assert "AGENTS.md not read: it looks like a secret" in warnings
    assert "../AGENTS.md not read: it holds a private key" in warnings


def test_links_out_binary_huge_and_unreadable_files_are_warned_about(repo: Path, tmp_path: Path) -> None:
    work = repo / "services" / "api"
    outside = tmp_path / "elsewhere.md"
    outside.write_text("Rules from outside the repository.\n")
    (repo / "AGENTS.md").symlink_to(outside)
    (repo / "services" / "AGENTS.md").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0binary")
    (work / "AGENTS.md").mkdir()  # a folder by that name: unreadable as a file
    found = read_instructions(Workspace(work))
    assert found.files == []
    warnings = "\n".join(found.warnings)
    assert "../../AGENTS.md not read: it is a link that leads outside the repository" in warnings
    assert "../AGENTS.md not read: it is not UTF-8 text" in warnings
    assert "\nAGENTS.md not read" in "\n" + warnings
    (repo / "services" / "AGENTS.md").write_text("x" * 300_000)
    assert "over 256 KB" in "\n".join(read_instructions(Workspace(repo / "services")).warnings)


def test_a_link_to_a_file_already_read_is_read_once(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("The one rule.\n")
    os.symlink("AGENTS.md", repo / "CLAUDE.md")
    (repo / "services" / "AGENTS.md").symlink_to(repo / "AGENTS.md")
    found = read_instructions(Workspace(repo / "services"))
    assert found.render().count("The one rule.") == 1 and not found.warnings


def test_the_flags_help_names_the_budget_the_agent_uses() -> None:
    from typer.main import get_command

    from whiz.agent.context.instructions import INSTRUCTIONS_TOKENS
    from whiz.cli import app

    for command in ("exec", "code", "acp"):
        params = get_command(app).commands[command].params
        [flag] = [p for p in params if p.name == "instructions_tokens"]
        assert flag.default == INSTRUCTIONS_TOKENS and flag.show_default is True, command
