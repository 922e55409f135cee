"""Undo: files come back byte for byte, created files go, deleted files return, git is left alone."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from whiz.agent.editing.edits import (
    Edit,
    PatchEdit,
    PatchHunk,
    SearchReplace,
    WholeFile,
    apply_changes,
    plan_edits,
)
from whiz.agent.editing.undo import UndoConflict, Undone, UndoStore
from whiz.agent.project.workspace import Workspace

ORIGINAL = {
    "app.py": b"def main():\n    return 1\n",
    "win.txt": b"one\r\ntwo\r\n",
    "tail.txt": b"no final newline",
    "doomed.txt": b"delete me\n",
}


@pytest.fixture(autouse=True)
def whiz_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Edit journals go to a WHIZ_HOME of the test's own."""
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path / "home"))


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
    store.record(turn_id, changes, ws)
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


def test_undo_keeps_a_line_the_user_added_after_the_turn(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "proj")
    store = UndoStore(tmp_path / "undo")
    (ws.root / "app.py").write_text("import sys\n\n\ndef main():\n    return 1\n")
    run_turn(ws, store, "t1", [SearchReplace("app.py", "    return 1\n", "    return 2\n")])
    (ws.root / "app.py").write_text("import os\nimport sys\n\n\ndef main():\n    return 2\n")
    undone = store.undo(ws)
    assert undone == Undone("t1", ["app.py"], merged=["app.py"])
    assert (ws.root / "app.py").read_text() == "import os\nimport sys\n\n\ndef main():\n    return 1\n"


def test_undo_refuses_and_changes_nothing_when_the_user_edited_the_same_lines(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "proj")
    store = UndoStore(tmp_path / "undo")
    run_turn(ws, store, "t1", TURN)
    (ws.root / "app.py").write_bytes(b"def main():\n    return 3  # mine\n")
    (ws.root / "pkg" / "new.py").write_text("x = 1\ny = 2\n")
    (ws.root / "doomed.txt").write_text("I wanted it back\n")
    after_user = snapshot(ws.root)
    with pytest.raises(UndoConflict) as refused:
        store.undo(ws)
    assert sorted(refused.value.reasons) == ["app.py", "doomed.txt", "pkg/new.py"]
    assert "app.py was edited since the turn" in refused.value.message
    assert snapshot(ws.root) == after_user  # not even the files that could be undone were touched
    assert store.turns() == ["t1"]

    # Once the user puts those files back as the turn left them, undo goes through.
    (ws.root / "app.py").write_bytes(b"def main():\n    return 2\n")
    (ws.root / "pkg" / "new.py").write_text("x = 1\n")
    (ws.root / "doomed.txt").unlink()
    store.undo(ws)
    assert snapshot(ws.root) == ORIGINAL


def test_files_the_user_removed_or_reverted_since_count_as_undone(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "proj")
    store = UndoStore(tmp_path / "undo")
    run_turn(ws, store, "t1", TURN)
    (ws.root / "pkg" / "new.py").unlink()  # created by the turn, removed by the user: as before
    (ws.root / "app.py").write_bytes(ORIGINAL["app.py"])
    undone = store.undo(ws)
    assert sorted(undone.restored) == ["doomed.txt", "tail.txt", "win.txt"]
    assert snapshot(ws.root) == ORIGINAL


def test_undo_brings_a_deleted_file_back_with_its_mode_and_keeps_modes(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "proj")
    (ws.root / "doomed.txt").chmod(0o751)
    (ws.root / "app.py").chmod(0o640)
    store = UndoStore(tmp_path / "undo")
    run_turn(ws, store, "t1", [PatchEdit("delete", "doomed.txt"), SearchReplace("app.py", "1", "2")])
    (ws.root / "app.py").chmod(0o600)  # the user's own chmod, after the turn
    store.undo(ws)
    assert snapshot(ws.root) == ORIGINAL
    assert (ws.root / "doomed.txt").stat().st_mode & 0o777 == 0o751
    assert (ws.root / "app.py").stat().st_mode & 0o777 == 0o600


def test_record_without_a_workspace_still_undoes(tmp_path: Path) -> None:
    # The older call, record(turn_id, changes): everything but the deleted file's mode is kept.
    ws = make_project(tmp_path / "proj")
    store = UndoStore(tmp_path / "undo")
    changes = plan_edits(ws, TURN)
    store.record("t1", changes)
    apply_changes(ws, changes)
    store.undo(ws)
    assert snapshot(ws.root) == ORIGINAL


def test_a_record_cut_short_before_its_manifest_is_not_a_turn(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "proj")
    store = UndoStore(tmp_path / "undo")
    run_turn(ws, store, "t1", [SearchReplace("app.py", "1", "2")])
    (tmp_path / "undo" / "000002").mkdir()
    (tmp_path / "undo" / "000002" / "0.blob").write_bytes(b"half")  # killed before the manifest
    assert store.turns() == ["t1"]
    run_turn(ws, store, "t2", [SearchReplace("app.py", "2", "3")])
    assert store.turns() == ["t1", "t2"]
    store.undo(ws)
    store.undo(ws)
    assert snapshot(ws.root) == ORIGINAL


def test_a_turn_recorded_by_an_older_whiz_is_undone_only_where_nothing_changed(tmp_path: Path) -> None:
    ws = make_project(tmp_path / "proj")
    folder = tmp_path / "undo" / "000001"
    folder.mkdir(parents=True)
    (folder / "0.blob").write_bytes(ORIGINAL["app.py"])
    manifest = {"turn_id": "old", "files": [{"path": "app.py", "blob": "0.blob"}]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (ws.root / "app.py").write_text("changed by someone\n")
    with pytest.raises(UndoConflict, match="older whiz"):
        UndoStore(tmp_path / "undo").undo(ws)
    assert (ws.root / "app.py").read_text() == "changed by someone\n"


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
