"""Before-images of every file a turn changes, so `/undo` can put them back, without losing later work.

Snapshots live in their own folder (e.g. WHIZ_HOME/undo/<session_id>), never in the project: undo works
the same in a git repository or not, and never touches the user's git history or index.

Layout: one folder per turn, numbered in order, holding manifest.json and, per file, a blob of its text
before the turn (if it existed) and of what the turn wrote (if it did not delete it), with the sha256
of the latter and the file's mode. Undo puts back a file still exactly as the turn left it; a file
edited since has the turn's change merged out of it (three-way); if that overlaps the user's edit,
undo refuses and changes no file at all.
"""

from __future__ import annotations

import json
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from whiz.agent.editing.edits import FileChange, apply_changes
from whiz.agent.editing.merge3 import merge3
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace
from whiz.agent.store.durable import fsync_dir, remove_durably, replace_durably, sha256

MANIFEST = "manifest.json"


class UndoConflict(WhizAgentError):
    """Undo would overwrite what the user changed since the turn; nothing was undone."""

    status = 409
    code = "undo_conflict"

    def __init__(self, reasons: dict[str, str]):
        self.reasons = reasons
        listed = "; ".join(f"{path} {why}" for path, why in reasons.items())
        super().__init__(
            f"Nothing was undone: {listed}. Taking the turn back would lose those changes; "
            "undo them by hand, or put the files back as the turn left them and undo again."
        )


@dataclass
class Undone:
    """What `UndoStore.undo` took back: the turn (or accepted edit) and the paths it wrote."""

    turn_id: str
    restored: list[str]
    """Empty when every file was already as before that turn."""
    merged: list[str] = field(default_factory=list)
    """Those of `restored` the user had edited since: the turn's change was taken out, theirs kept."""


class UndoStore:
    """The turns of one session, newest last; `record` before applying, `undo` to restore the latest."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def record(self, turn_id: str, changes: list[FileChange], ws: Workspace | None = None) -> None:
        """Keep the before-image of each changed file, and what the turn writes. Call it BEFORE
        apply_changes, with the planned changes: their `after` is what the turn writes.

        Several calls with the same turn_id (the latest) add to one turn; a file's first image in a turn
        is the one kept, since that is the state before the turn, and its last `after` is what the turn
        left. With `ws`, each file's mode is kept too, so undoing a deletion brings it back as it was.
        Written so that a crash leaves the previous record or this one, never a mix.
        """
        folders = self._folders()
        if folders and self._manifest(folders[-1])["turn_id"] == turn_id:
            folder = folders[-1]
            manifest = self._manifest(folder)
        else:
            number = int(folders[-1].name) + 1 if folders else 1
            folder = self.directory / f"{number:06d}"
            folder.mkdir(parents=True, exist_ok=True)
            fsync_dir(folder.parent)
            manifest = {"turn_id": turn_id, "files": []}
        entries = {entry["path"]: entry for entry in manifest["files"]}
        replaced = {entry.get("after_blob") for entry in manifest["files"]}
        for change in changes:
            entry = entries.get(change.path)
            if entry is None:
                entry = {"path": change.path, "blob": None, "mode": _mode(ws, change)}
                if change.before is not None:
                    entry["blob"] = f"{len(manifest['files'])}.blob"
                    replace_durably(folder / entry["blob"], change.before.encode("utf-8"))
                manifest["files"].append(entry)
                entries[change.path] = entry
            after = None if change.after is None else change.after.encode("utf-8")
            entry["after_sha256"] = sha256(after)
            entry["after_blob"] = None
            if after is not None:
                # A fresh name each time: the manifest on disk still names the previous one.
                entry["after_blob"] = f"{manifest['files'].index(entry)}.{entry['after_sha256'][:12]}.after"
                replace_durably(folder / entry["after_blob"], after)
        replace_durably(folder / MANIFEST, json.dumps(manifest, indent=1).encode("utf-8"))
        for name in replaced - {entry.get("after_blob") for entry in manifest["files"]} - {None}:
            (folder / name).unlink(missing_ok=True)

    def turns(self) -> list[str]:
        """The recorded turn ids, oldest first."""
        return [self._manifest(folder)["turn_id"] for folder in self._folders()]

    def undo(self, ws: Workspace) -> Undone | None:
        """Take back the latest turn, all files or none, and forget it.

        A file still as the turn left it gets its old text back (a file the turn created goes, one it
        deleted returns with its mode). A file changed since keeps those changes, with the turn's own
        change merged out of it; where they overlap, raises UndoConflict and changes nothing. Returns
        the turn and the paths written, or None when there is nothing to undo.
        """
        folders = self._folders()
        if not folders:
            return None
        folder = folders[-1]
        manifest = self._manifest(folder)
        changes, merged, conflicts = [], [], {}
        for entry in manifest["files"]:
            before = _blob(folder, entry["blob"])
            current = ws.read_text(entry["path"]) if ws.resolve(entry["path"]).is_file() else None
            if current == before:
                continue
            wanted, why = _revert(folder, entry, before, current)
            if why is not None:
                conflicts[entry["path"]] = why
                continue
            if wanted == current:  # the turn's change was already gone
                continue
            if wanted != before:
                merged.append(entry["path"])
            mode = entry.get("mode") if current is None else None  # an existing file keeps its own
            changes.append(FileChange(entry["path"], current, wanted, mode=mode))
        if conflicts:
            raise UndoConflict(conflicts)
        apply_changes(ws, changes)
        # The manifest goes first: a crash mid-way leaves a folder that no longer counts as a turn.
        remove_durably(folder / MANIFEST)
        shutil.rmtree(folder)
        return Undone(manifest["turn_id"], [change.path for change in changes], merged)

    def originals(self) -> dict[str, str | None]:
        """Each file's text before the earliest turn still recorded (None: it did not exist then).

        With the files as they are now, this gives the net change of every turn `undo` could still
        take back (the UI's `/diff`).
        """
        found: dict[str, str | None] = {}
        for folder in self._folders():
            for entry in self._manifest(folder)["files"]:
                if entry["path"] not in found:
                    found[entry["path"]] = _blob(folder, entry["blob"])
        return found

    def _folders(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.iterdir() if p.name.isdigit() and (p / MANIFEST).is_file())

    def _manifest(self, folder: Path) -> dict:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


def _revert(
    folder: Path, entry: dict, before: str | None, current: str | None
) -> tuple[str | None, str | None]:
    """The text that takes the turn's change out of `current`, or (None, why) where that would lose
    something the user did since the turn."""
    if "after_sha256" not in entry:
        return None, "was recorded by an older whiz, which kept no copy of what the turn wrote"
    now = None if current is None else sha256(current.encode("utf-8"))
    if now == entry["after_sha256"]:
        return before, None
    if current is None:
        return None, "was deleted since the turn"
    if entry["after_sha256"] is None:
        return None, "was deleted by the turn and created again since"
    if before is None:
        return None, "was created by the turn and edited since"
    merged = merge3(_blob(folder, entry["after_blob"]) or "", current, before)
    if merged is None:
        return None, "was edited since the turn, on or next to the lines the turn changed"
    return merged, None


def _blob(folder: Path, name: str | None) -> str | None:
    return None if name is None else (folder / name).read_bytes().decode("utf-8")


def _mode(ws: Workspace | None, change: FileChange) -> int | None:
    if ws is None or change.before is None:
        return None
    try:
        return stat.S_IMODE(ws.resolve(change.path).stat().st_mode)
    except OSError:
        return None
