"""git as whiz asks it things: an answer, or None where git cannot say."""

from __future__ import annotations

from pathlib import Path

from whiz.environments.git import git


def test_an_answer_from_a_repository(tmp_path: Path):
    assert git(tmp_path, "init", "-q") is not None
    done = git(tmp_path, "rev-parse", "--is-inside-work-tree")
    assert done is not None and done.stdout.strip() == b"true"


def test_a_refusal_is_none_unless_the_caller_reads_the_status(tmp_path: Path):
    assert git(tmp_path, "rev-parse", "--show-toplevel") is None  # not a repository
    done = git(tmp_path, "rev-parse", "--show-toplevel", check=False)
    assert done is not None and done.returncode != 0


def test_git_missing_is_none_not_an_exception(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on it
    assert git(tmp_path, "status") is None
