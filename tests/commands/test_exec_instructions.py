"""`whiz exec` with an AGENTS.md: the model's prompt holds it, and the user sees which files were read
(a `whiz:` line, and a `project_instructions` item in `--json`)."""

from __future__ import annotations

from pathlib import Path

from tests.commands.test_exec import events, whiz

RULE = "Answer every question with the word PINEAPPLE."


def obeys_the_rule(conversation: str) -> str:
    """A model that follows the project's rule only when its prompt holds it."""
    return "PINEAPPLE" if RULE in conversation else "I was told nothing."


def test_exec_json_lists_the_files_and_the_model_reads_them(serve_fake, project: Path, tmp_path: Path):
    (project / "AGENTS.md").write_text(f"# Rules\n\n{RULE}\n")
    server = serve_fake(script=obeys_the_rule)
    done = whiz(
        ["exec", "--json", "--base-url", server.root, "What is in greet.py?"], project, tmp_path / "h"
    )
    assert done.returncode == 0, done.stderr
    evs = events(done.stdout)
    [item] = [e["item"] for e in evs if e.get("item", {}).get("type") == "project_instructions"]
    assert item["files"] == [{"path": "AGENTS.md", "tokens": 14, "shown_tokens": 14, "cut": False}]
    assert item["cut"] is False and item["warnings"] == []
    answer = [e["item"]["text"] for e in evs if e.get("item", {}).get("type") == "agent_message"]
    assert answer and "PINEAPPLE" in answer[-1]


def test_exec_says_which_files_were_read_and_that_they_were_cut(serve_fake, project: Path, tmp_path: Path):
    (project / "AGENTS.md").write_text(f"{RULE}\n" + "Keep functions short.\n" * 200)
    server = serve_fake(script=obeys_the_rule)
    args = ["exec", "--base-url", server.root, "--instructions-tokens", "100", "What is in greet.py?"]
    done = whiz(args, project, tmp_path / "h")
    assert done.returncode == 0, done.stderr
    assert "whiz: instructions: AGENTS.md (about" in done.stderr
    assert "cut to the 100-token budget: AGENTS.md; --instructions-tokens raises it" in done.stderr
    assert "PINEAPPLE" in done.stdout  # the rule at the top survived the cut


def test_exec_with_no_instructions_says_nothing_about_them(serve_fake, project: Path, tmp_path: Path):
    server = serve_fake(script=obeys_the_rule)
    done = whiz(["exec", "--base-url", server.root, "What is in greet.py?"], project, tmp_path / "h")
    assert done.returncode == 0, done.stderr
    assert "instructions:" not in done.stderr and "I was told nothing." in done.stdout
