"""Before-images of every file a turn changes, so `/undo` can put them back byte for byte.

Snapshots live in their own folder (e.g. WHIZ_HOME/undo/<session_id>), never in the project: undo works
the same in a git repository or not, and never touches the user's git history or index.

Layout: one folder per turn, numbered in order, holding manifest.json and one blob per file that existed.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from whiz.agent.edits import FileChange, apply_changes
from whiz.agent.workspace import Workspace

MANIFEST = "manifest.json"


@dataclass
class Undone:
    """What `UndoStore.undo` took back: the turn (or accepted edit) and the paths it wrote."""

    turn_id: str
    restored: list[str]
    """Empty when every file was already as before that turn."""


class UndoStore:
    """The turns of one session, newest last; `record` before applying, `undo` to restore the latest."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def record(self, turn_id: str, changes: list[FileChange]) -> None:
        """Keep the before-image of each changed file. Call it BEFORE apply_changes.

        Several calls with the same turn_id (the latest) add to one turn; a file's first image in a turn
        is the one kept, since that is the state before the turn.
        """
        folders = self._folders()
        if folders and self._manifest(folders[-1])["turn_id"] == turn_id:
            folder = folders[-1]
            manifest = self._manifest(folder)
        else:
            number = int(folders[-1].name) + 1 if folders else 1
            folder = self.directory / f"{number:06d}"
            folder.mkdir(parents=True, exist_ok=True)
            manifest = {"turn_id": turn_id, "files": []}
        known = {entry["path"] for entry in manifest["files"]}
        for change in changes:
            if change.path in known:
                continue
            known.add(change.path)
            entry = {"path": change.path, "blob": None}
            if change.before is not None:
                entry["blob"] = f"{len(manifest['files'])}.blob"
                (folder / entry["blob"]).write_bytes(change.before.encode("utf-8"))
            manifest["files"].append(entry)
        _write_json(folder / MANIFEST, manifest)

    def turns(self) -> list[str]:
        """The recorded turn ids, oldest first."""
        return [self._manifest(folder)["turn_id"] for folder in self._folders()]

    def undo(self, ws: Workspace) -> Undone | None:
        """Restore every file of the latest turn exactly, all or none, and forget that turn.

        Files the turn created are removed and files it deleted come back. Returns the turn and the
        paths written, or None when there is nothing to undo.
        """
        folders = self._folders()
        if not folders:
            return None
        folder = folders[-1]
        manifest = self._manifest(folder)
        changes = []
        for entry in manifest["files"]:
            wanted = (folder / entry["blob"]).read_bytes().decode("utf-8") if entry["blob"] else None
            current = ws.read_text(entry["path"]) if ws.resolve(entry["path"]).is_file() else None
            if current != wanted:
                changes.append(FileChange(entry["path"], current, wanted))
        apply_changes(ws, changes)
        shutil.rmtree(folder)
        return Undone(manifest["turn_id"], [change.path for change in changes])

    def originals(self) -> dict[str, str | None]:
        """Each file's text before the earliest turn still recorded (None: it did not exist then).

        With the files as they are now, this gives the net change of every turn `undo` could still
        take back (the UI's `/diff`).
        """
        found: dict[str, str | None] = {}
        for folder in self._folders():
            for entry in self._manifest(folder)["files"]:
                if entry["path"] not in found:
                    blob = folder / entry["blob"] if entry["blob"] else None
                    found[entry["path"]] = blob.read_bytes().decode("utf-8") if blob else None
        return found

    def _folders(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.iterdir() if p.name.isdigit() and (p / MANIFEST).is_file())

    def _manifest(self, folder: Path) -> dict:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


def _write_json(path: Path, data: dict) -> None:
    # Write then rename, so a crash never leaves a half-written manifest behind.
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(temp, path)
