"""Undo: files come back byte for byte, created files go, deleted files return, git is left alone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from whiz.agent.edits import Edit, PatchEdit, PatchHunk, SearchReplace, WholeFile, apply_changes, plan_edits
from whiz.agent.undo import Undone, UndoStore
from whiz.agent.workspace import Workspace

ORIGINAL = {
    "app.py": b"def main():\n    return 1\n",
    "win.txt": b"one\r\ntwo\r\n",
    "tail.txt": b"no final newline",
    "doomed.txt": b"delete me\n",
}


def make_project(root: Path) -> Workspace:
    root.mkdir()
    for name, data in ORIGINAL.items():
        (root / name).write_bytes(data)
    return Workspace(root)


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def run_turn(ws: Workspace, store: UndoStore, turn_id: str, edits: list[Edit]) -> None:
    """What the agent loop does for one turn: plan, record the before-images, apply."""
    changes = plan_edits(ws, edits)
    store.record(turn_id, changes)
    apply_changes(ws, changes)


TURN = [
    SearchReplace("app.py", "    return 1\n", "    return 2\n"),
    SearchReplace("win.txt", "two\n", "TWO\n"),
    WholeFile("tail.txt", "changed"),
    PatchEdit("delete", "doomed.txt"),
    PatchEdit("add", "pkg/new.py", content="x = 1\n"),
]


def test_undo_restores_exact_bytes_without_git(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "proj")
    store = UndoStore(tmp_path / "undo" / "session-1")
    run_turn(ws, store, "t1", TURN)
    assert snapshot(ws.root) != ORIGINAL
    undone = store.undo(ws)
    assert undone.turn_id == "t1"
    assert sorted(undone.restored) == ["app.py", "doomed.txt", "pkg/new.py", "tail.txt", "win.txt"]
    assert snapshot(ws.root) == ORIGINAL
    assert store.turns() == []
    assert store.undo(ws) is None


def test_turns_are_undone_newest_first_and_survive_a_restart(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "proj")
    store = UndoStore(tmp_path / "undo")
    run_turn(ws, store, "t1", [SearchReplace("app.py", "return 1", "return 2")])
    after_first = snapshot(ws.root)
    run_turn(ws, store, "t2", [SearchReplace("app.py", "return 2", "return 3")])
    # The same turn may apply several edits; the turn's first image is what undo restores.
    run_turn(ws, store, "t2", [SearchReplace("app.py", "return 3", "return 4"), WholeFile("b.txt", "b\n")])
    reopened = UndoStore(tmp_path / "undo")
    assert reopened.turns() == ["t1", "t2"]
    assert reopened.undo(ws) == Undone("t2", ["app.py", "b.txt"])
    assert snapshot(ws.root) == after_first
    reopened.undo(ws)
    assert snapshot(ws.root) == ORIGINAL


def test_undo_after_the_user_touched_files_still_restores(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "proj")
    store = UndoStore(tmp_path / "undo")
    run_turn(ws, store, "t1", TURN)
    (ws.root / "pkg" / "new.py").unlink()
    (ws.root / "app.py").write_text("user rewrote it\n")
    store.undo(ws)
    assert snapshot(ws.root) == ORIGINAL


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_undo_in_a_git_repo_leaves_history_and_index_alone(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "repo")

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ws.root, check=True, capture_output=True, text=True)
        return done.stdout

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    (ws.root / "app.py").write_bytes(b"def main():\n    return 10\n")  # an unstaged change of the user's
    (ws.root / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    git("add", "win.txt")  # a staged change of the user's
    status_before = git("status", "--porcelain")
    head, index = git("rev-parse", "HEAD"), (ws.root / ".git" / "index").read_bytes()
    refs, logs = git("for-each-ref"), git("log", "--all", "--oneline")
    worktree = snapshot(ws.root)

    store = UndoStore(tmp_path / "undo")
    run_turn(ws, store, "t1", [SearchReplace("app.py", "return 10", "return 20"), *TURN[1:]])
    assert snapshot(ws.root) != worktree
    store.undo(ws)

    # Checked before any git command runs again, since `git status` may rewrite the index's stat data.
    assert (ws.root / ".git" / "index").read_bytes() == index
    assert snapshot(ws.root) == worktree
    assert git("rev-parse", "HEAD") == head
    assert git("for-each-ref") == refs and git("log", "--all", "--oneline") == logs
    assert git("status", "--porcelain") == status_before
    assert git("diff", "--cached", "--name-only") == "win.txt\n"  # the user's staged file is still staged
    assert not list(ws.root.glob("**/*.whiz-*"))


def test_undo_of_an_update_with_move(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "proj")
    store = UndoStore(tmp_path / "undo")
    run_turn(
        ws,
        store,
        "t1",
        [
            PatchEdit(
                "update",
                "app.py",
                hunks=[PatchHunk(["    return 1"], ["    return 5"])],
                move_to="src/app.py",
            )
        ],
    )
    assert not (ws.root / "app.py").exists()
    store.undo(ws)
    assert snapshot(ws.root) == ORIGINAL
