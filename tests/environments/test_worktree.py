"""Isolated copies: the working tree's state, changes kept apart, nothing left behind."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from whiz.environments.sandbox import environment_for
from whiz.environments.worktree import CopyError, isolated_copy, sweep_stale_copies


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "a.py").write_text("a = 1\n")
    (root / "gone.py").write_text("x = 1\n")
    (root / ".gitignore").write_text("build/\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    return root


def test_a_git_copy_has_the_uncommitted_state_and_leaves_the_repo_as_it_was(repo: Path):
    (repo / "a.py").write_text("a = 2\n")  # modified, not committed
    (repo / "new.py").write_text("n = 1\n")  # untracked
    (repo / "gone.py").unlink()  # deleted
    (repo / "build").mkdir()
    (repo / "build" / "big.bin").write_text("ignored")
    status_before = git(repo, "status", "--porcelain")
    with isolated_copy(repo) as copy:
        assert copy.kind == "git-worktree"
        assert copy.read_text("a.py") == "a = 2\n"
        assert copy.read_text("new.py") == "n = 1\n"
        assert copy.read_text("gone.py") is None
        assert not (copy.path / "build").exists()  # ignored files stay out
        (copy.path / "a.py").write_text("a = 3\n")
        assert (repo / "a.py").read_text() == "a = 2\n"
    assert not copy.path.exists()
    assert git(repo, "status", "--porcelain") == status_before
    assert len(git(repo, "worktree", "list").splitlines()) == 1
    assert git(repo, "log", "--oneline").count("\n") == 1


def test_a_subfolder_of_a_repo_is_copied_as_that_subfolder(repo: Path):
    # Plainly: whiz runs git only on the repository whose top is the folder it was given.
    (repo / "pkg").mkdir()
    (repo / "pkg" / "m.py").write_text("m = 1\n")
    with isolated_copy(repo / "pkg") as copy:
        assert copy.kind == "copy"
        assert copy.read_text("m.py") == "m = 1\n"
        assert copy.read_text("a.py") is None
    assert len(git(repo, "worktree", "list").splitlines()) == 1


def test_a_plain_folder_is_copied_without_caches_and_with_its_venv_linked(tmp_path: Path):
    root = tmp_path / "plain"
    (root / "src").mkdir(parents=True)
    (root / "src" / "m.py").write_text("m = 1\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "m.pyc").write_bytes(b"\0")
    (root / ".venv" / "bin").mkdir(parents=True)
    with isolated_copy(root) as copy:
        assert copy.kind == "copy"
        assert copy.read_text("src/m.py") == "m = 1\n"
        assert not (copy.path / "__pycache__").exists()
        assert (copy.path / ".venv").is_symlink() and (copy.path / ".venv").resolve() == root / ".venv"
    assert (root / ".venv" / "bin").is_dir()  # removing the copy does not follow the link


def test_a_repo_without_commits_falls_back_to_a_copy(tmp_path: Path):
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.py").write_text("a = 1\n")
    with isolated_copy(root) as copy:
        assert copy.kind == "copy" and copy.read_text("a.py") == "a = 1\n"


def test_a_missing_folder_is_a_clear_error(tmp_path: Path):
    with pytest.raises(CopyError, match="not a folder"):
        isolated_copy(tmp_path / "nope")


def test_a_git_copy_has_staged_changes_too(repo: Path):
    (repo / "staged_new.py").write_text("s = 1\n")
    (repo / "a.py").write_text("a = 2\n")
    git(repo, "add", "staged_new.py", "a.py")  # staged, not changed since
    git(repo, "rm", "-q", "gone.py")  # a staged deletion
    (repo / "b.py").write_text("b = 1\n")
    git(repo, "add", "b.py")
    (repo / "b.py").write_text("b = 2\n")  # staged, then changed again: the working tree wins
    with isolated_copy(repo) as copy:
        assert copy.kind == "git-worktree"
        assert copy.read_text("staged_new.py") == "s = 1\n"
        assert copy.read_text("a.py") == "a = 2\n"
        assert copy.read_text("gone.py") is None
        assert copy.read_text("b.py") == "b = 2\n"
    assert git(repo, "diff", "--cached", "--name-only").split() == [
        "a.py",
        "b.py",
        "gone.py",
        "staged_new.py",
    ]


@pytest.mark.parametrize("use_git", [True, False])
async def test_a_copys_linked_dependencies_are_read_only_in_the_sandbox(repo: Path, use_git: bool):
    (repo / ".gitignore").write_text("build/\n.venv/\n")
    (repo / ".venv" / "lib").mkdir(parents=True)
    (repo / ".venv" / "lib" / "pkg.py").write_text("VERSION = 1\n")
    with isolated_copy(repo, use_git=use_git) as copy:
        env = environment_for(copy.path)
        result = await env.run(
            "cat .venv/lib/pkg.py; echo VERSION = 2 > .venv/lib/pkg.py; touch .venv/lib/installed.py;"
            " echo a = 9 > a.py"
        )
        assert "VERSION = 1" in result.output  # the tests can import from it
        assert copy.read_text("a.py") == "a = 9\n"  # the candidate's own files are writable
    assert (repo / ".venv" / "lib" / "pkg.py").read_text() == "VERSION = 1\n"
    assert not (repo / ".venv" / "lib" / "installed.py").exists()
    assert (repo / "a.py").read_text() == "a = 1\n"


def test_copies_a_killed_whiz_left_are_swept_and_their_worktrees_pruned(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    temp = tmp_path / "temp"
    temp.mkdir()
    # A whiz that makes a copy, then dies before it can remove it.
    script = (
        "import os, signal, tempfile, sys\n"
        f"tempfile.tempdir = {str(temp)!r}\n"
        "from whiz.environments.worktree import isolated_copy\n"
        f"isolated_copy(__import__('pathlib').Path({str(repo)!r}), prefix='whiz-heal-')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=False)
    left = list(temp.glob("whiz-heal-*"))
    assert len(left) == 1 and str(left[0]) in git(repo, "worktree", "list")
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with isolated_copy(repo, prefix="whiz-heal-") as mine:  # a live copy, this process's: kept
        assert sweep_stale_copies(repo, temp_dir=temp) == left
        assert not left[0].exists() and str(left[0]) not in git(repo, "worktree", "list")
        assert mine.path.exists() and str(mine.path.parent) in git(repo, "worktree", "list")
    (temp / "whiz-not-a-copy").mkdir()  # no owner file: not whiz's to judge
    assert sweep_stale_copies(repo, temp_dir=temp) == [] and (temp / "whiz-not-a-copy").exists()


@pytest.mark.parametrize("kind", ["git-worktree", "copy"])
def test_a_copy_leaves_secret_files_out_unless_commands_may_read_them(repo: Path, kind: str):
    source = repo if kind == "git-worktree" else repo / "sub"
    source.mkdir(exist_ok=True)
    (source / ".gitignore").write_text(".env\n")
    (source / ".env").write_text("KEY=sk_live_value\n")  # ignored: git leaves it out anyway
    (source / "deploy.pem").write_text("key\n")  # untracked, not ignored: git copies it
    (source / "secrets").mkdir()
    (source / "secrets" / "db").write_text("password\n")
    (source / "notes.txt").hardlink_to(source / ".env")
    with isolated_copy(source) as copy:
        assert copy.kind == kind
        assert [p for p in (".env", "deploy.pem", "secrets", "notes.txt") if (copy.path / p).exists()] == []
        assert (copy.path / ".gitignore").exists()
    with isolated_copy(source, keep_secrets=True) as copy:
        assert (copy.path / ".env").read_text() == "KEY=sk_live_value\n"
        assert (copy.path / "secrets" / "db").read_text() == "password\n"
        assert (copy.path / "deploy.pem").exists()
