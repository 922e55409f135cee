"""git as whiz asks it things: an answer, or None where git cannot say; and never a program that
the repository, whiz's environment or the user's global config names."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from whiz.environments.git import Repository, run_outside_repositories
from whiz.environments.worktree import isolated_copy

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def plain_git(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """git as a user runs it: the tests' own, to build repositories (and to show a plant works)."""
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    plain_git(root, "init", "-q")
    (root / "a.py").write_text("a = 1\n")
    plain_git(root, "add", "-A")
    plain_git(root, "commit", "-qm", "start")
    return root


def test_an_answer_from_a_repository(repo: Path):
    found = Repository.at(repo)
    assert found is not None and found.git_dir == repo / ".git"
    done = found.run("ls-files")
    assert done is not None and done.stdout == b"a.py\n"


def test_a_refusal_is_none_unless_the_caller_reads_the_status(repo: Path):
    found = Repository.at(repo)
    assert found is not None
    assert found.run("rev-parse", "--verify", "no-such-branch") is None
    done = found.run("rev-parse", "--verify", "no-such-branch", check=False)
    assert done is not None and done.returncode != 0


def test_git_missing_is_none_not_an_exception(repo: Path, tmp_path: Path, monkeypatch):
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no git on it
    found = Repository.at(repo)
    assert found is not None and found.run("status") is None


def test_only_a_folders_own_git_folder_makes_it_a_repository(repo: Path, tmp_path: Path):
    (repo / "sub").mkdir()
    assert Repository.at(repo / "sub") is None  # below the top: no git for it
    assert Repository.at(tmp_path) is None
    # A folder that looks like a git folder (HEAD, objects/, refs/) is no repository's top...
    (repo / "evil" / "objects").mkdir(parents=True)
    (repo / "evil" / "refs").mkdir()
    (repo / "evil" / "HEAD").write_text("ref: refs/heads/main\n")
    assert Repository.at(repo / "evil") is None
    # ...nor is one that a `gitdir:` file leads to inside the work tree.
    ws = tmp_path / "ws"
    shutil.copytree(repo / "evil", ws / "evil")
    (ws / ".git").write_text("gitdir: evil\n")
    assert Repository.at(ws) is None
    # ...nor one that a git folder's `commondir` names (its config would be the work tree's file).
    (repo / ".git" / "commondir").write_text("../evil\n")
    assert Repository.at(repo) is None


def test_a_linked_worktree_is_a_repository_through_its_gitdir_file(repo: Path, tmp_path: Path):
    plain_git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"), "HEAD")
    found = Repository.at(tmp_path / "linked")
    assert found is not None and found.git_dir.parent == repo / ".git" / "worktrees"
    done = found.run("ls-files")
    assert done is not None and done.stdout == b"a.py\n"


def test_git_variables_in_whizs_environment_are_not_followed(repo: Path, tmp_path: Path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    plain_git(other, "init", "-q")
    (other / "b.py").write_text("b = 1\n")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    found = Repository.at(repo)
    assert found is not None
    done = found.run("ls-files", "--cached", "--others")
    assert done is not None and done.stdout == b"a.py\n"


def test_the_users_global_config_runs_nothing(repo: Path, tmp_path: Path, monkeypatch):
    marker = tmp_path / "MARKER"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f'[core]\n\tfsmonitor = "touch {marker}; :"\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    found = Repository.at(repo)
    assert found is not None and found.run("ls-files") is not None
    assert not marker.exists()


def test_a_git_written_in_the_work_tree_is_not_the_git_that_runs(repo: Path, tmp_path: Path, monkeypatch):
    marker = tmp_path / "MARKER"
    for folder in (repo, repo / ".venv" / "bin"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "git").write_text(f"#!/bin/sh\ntouch {marker}\n")
        (folder / "git").chmod(0o755)
    # A PATH with the current folder on it, and a virtual environment of the workspace activated.
    monkeypatch.setenv("PATH", os.pathsep.join([".", "", str(repo / ".venv" / "bin"), os.environ["PATH"]]))
    found = Repository.at(repo)
    assert found is not None and found.run("ls-files") is not None
    assert not marker.exists()


def test_a_config_read_from_outside_the_git_folder_is_not_used(repo: Path, tmp_path: Path):
    # The included file could change between whiz reading the config and git running the command.
    (repo / "extra.cfg").write_text("[core]\n\tquotepath = false\n")
    plain_git(repo, "config", "include.path", "../extra.cfg")
    found = Repository.at(repo)
    assert found is not None and found.run("ls-files") is None
    plain_git(repo, "config", "--unset", "include.path")
    assert found.run("ls-files") is not None
    # The same for a config that is a link to a file of the work tree.
    (repo / "config.txt").write_bytes((repo / ".git" / "config").read_bytes())
    (repo / ".git" / "config").unlink()
    (repo / ".git" / "config").symlink_to(repo / "config.txt")
    assert found.run("ls-files") is None


def hostile_repository(root: Path, markers: Path) -> None:
    """A repository whose config and hooks name a program for each way git runs one in the commands
    whiz uses, and which holds a planted bare repository with its own fsmonitor. Each program
    touches a file in `markers` named after the way it ran."""
    markers.mkdir()
    evil = root / "evil"
    (evil / "objects" / "info").mkdir(parents=True)
    (evil / "refs" / "heads").mkdir(parents=True)
    (evil / "objects" / "info" / "README").write_text("x\n")
    (evil / "refs" / "heads" / "README").write_text("x\n")
    (evil / "HEAD").write_text("ref: refs/heads/main\n")
    (evil / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n"
        f'\tfsmonitor = "touch {markers}/planted-fsmonitor; :"\n'
    )
    (root / ".gitattributes").write_text("* filter=evil diff=evil\n")
    plain_git(root, "add", "-A")
    plain_git(root, "commit", "-qm", "hostile")
    for key, name in [
        ("core.fsmonitor", "fsmonitor"),
        ("filter.evil.smudge", "smudge"),
        ("filter.evil.clean", "clean"),
        ("diff.evil.textconv", "textconv"),
        ("diff.evil.command", "diff-command"),
        ("diff.external", "diff-external"),
    ]:
        plain_git(root, "config", key, f"touch {markers}/{name}; cat")
    plain_git(root, "config", "filter.evil.required", "true")
    for hook in ("post-checkout", "reference-transaction", "post-index-change"):
        path = root / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\ntouch {markers}/{hook}\n")
        path.chmod(0o755)


def test_a_heal_copy_of_a_hostile_repository_runs_nothing(repo: Path, tmp_path: Path):
    markers = tmp_path / "markers"
    hostile_repository(repo, markers)
    (repo / "a.py").write_text("a = 2\n")  # the copy must carry the change
    (repo / "new.py").write_text("n = 1\n")
    with isolated_copy(repo) as copy:
        assert copy.kind == "git-worktree"
        assert copy.read_text("a.py") == "a = 2\n" and copy.read_text("new.py") == "n = 1\n"
        assert copy.read_text("evil/config") is not None
        # The swarm copies a copy: through the worktree's `gitdir:` file.
        with isolated_copy(copy.path) as second:
            assert second.kind == "git-worktree" and second.read_text("a.py") == "a = 2\n"
    assert sorted(p.name for p in markers.iterdir()) == []


def test_a_repository_planted_where_a_submodule_goes_runs_nothing_in_a_heal_copy(repo: Path, tmp_path: Path):
    # A clone can hold a submodule entry without its repository; a command run in the workspace
    # can then put one there, with a filter on every file, and leave a file git must re-read.
    marker = tmp_path / "MARKER"
    inner = tmp_path / "inner"
    inner.mkdir()
    plain_git(inner, "init", "-q")
    (inner / "f").write_text("f\n")
    plain_git(inner, "add", "-A")
    plain_git(inner, "commit", "-qm", "inner")
    commit = plain_git(inner, "rev-parse", "HEAD").stdout.strip()
    plain_git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},sub")
    (repo / ".gitmodules").write_text('[submodule "sub"]\n\tpath = sub\n\turl = ../inner\n')
    plain_git(repo, "add", ".gitmodules")
    plain_git(repo, "commit", "-qm", "a submodule")
    shutil.copytree(inner, repo / "sub")
    plain_git(repo / "sub", "config", "filter.evil.clean", f"touch {marker}; cat")
    (repo / "sub" / ".gitattributes").write_text("* filter=evil\n")
    os.utime(repo / "sub" / "f", (0, 0))
    with isolated_copy(repo) as copy:
        assert copy.kind == "git-worktree"
    assert not marker.exists()


def test_the_hostile_repository_does_run_its_programs_under_plain_git(repo: Path, tmp_path: Path):
    # What the test above holds back: the same repository, asked by git the way whiz used to (with
    # git's defaults: this machine's own settings could hold some of it back).
    markers = tmp_path / "markers"
    hostile_repository(repo, markers)
    defaults = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    plain_git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"), "HEAD", env=defaults)
    plain_git(repo / "evil", "ls-files", env=defaults)
    ran = {p.name for p in markers.iterdir()}
    assert {"fsmonitor", "smudge", "post-checkout", "planted-fsmonitor"} <= ran


def test_outside_repositories_git_looks_in_the_folder_alone(repo: Path):
    (repo / "tmp").mkdir()
    assert run_outside_repositories(repo / "tmp", "rev-parse", "--show-toplevel") is None
    done = run_outside_repositories(repo / "tmp", "merge-file", "-p", "/dev/null", "/dev/null", "/dev/null")
    assert done is not None and done.stdout == b""
