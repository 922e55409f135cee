"""The `FileAccess` seam: a workspace whose existing files are read and edited elsewhere than on
the disk (an editor's buffers, in `whiz acp`), while new and deleted files keep the journal."""

from __future__ import annotations

from pathlib import Path

import pytest

from whiz.agent.editing.edits import EditError, FileChange, SearchReplace, apply_changes, plan_edits
from whiz.agent.project.workspace import Workspace


class Buffers:
    """Files held in memory over the disk; `write` False: it does not write (the disk does)."""

    def __init__(self, texts: dict[Path, str], write: bool = True, fail: bool = False):
        self.texts = texts
        self.write = write
        self.fail = fail
        self.written: list[Path] = []

    def read_text(self, path: Path) -> str | None:
        return self.texts.get(path)

    def write_text(self, path: Path, text: str) -> bool:
        if self.fail:
            raise OSError("the editor went away")
        if not self.write:
            return False
        self.texts[path] = text
        self.written.append(path)
        return True


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "a.py").write_text("x = 1\n")
    return Workspace(tmp_path)


def test_reads_and_edits_go_to_the_buffer_not_the_disk(ws: Workspace) -> None:
    path = ws.root / "a.py"
    ws.files = Buffers({path: "x = 2  # unsaved\n"})
    assert ws.read_text("a.py") == "x = 2  # unsaved\n"
    changes = plan_edits(ws, [SearchReplace("a.py", "x = 2", "x = 3")])
    apply_changes(ws, changes, journal_dir=ws.root.parent / "journal")
    assert ws.files.texts[path] == "x = 3  # unsaved\n"
    assert path.read_text() == "x = 1\n"


def test_a_new_file_goes_to_the_disk_through_the_journal(ws: Workspace) -> None:
    buffers = Buffers({})
    ws.files = buffers
    apply_changes(ws, [FileChange("b.py", None, "y = 1\n")], journal_dir=ws.root.parent / "journal")
    assert (ws.root / "b.py").read_text() == "y = 1\n" and buffers.written == []


def test_an_access_that_does_not_write_leaves_it_to_the_disk(ws: Workspace) -> None:
    ws.files = Buffers({}, write=False)
    apply_changes(ws, [FileChange("a.py", "x = 1\n", "x = 9\n")], journal_dir=ws.root.parent / "journal")
    assert (ws.root / "a.py").read_text() == "x = 9\n"


def test_a_failed_write_is_an_edit_error_that_names_the_file(ws: Workspace) -> None:
    ws.files = Buffers({}, fail=True)
    with pytest.raises(EditError, match="a.py.*went away"):
        apply_changes(ws, [FileChange("a.py", "x = 1\n", "x = 9\n")], journal_dir=ws.root.parent / "journal")
