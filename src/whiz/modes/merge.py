"""Merging a worker's files back into the workspace: three-way, per file, all of a task or none.

For each file the worker changed there are three versions: the base (when the swarm started),
ours (the workspace now, which earlier merges or the user may have changed) and theirs (the
worker's). If only one side changed it, that side wins; if both made the same change, fine;
if both changed it differently, `git merge-file` merges them line by line where their changes
do not overlap. Overlapping changes are a conflict: the task's files are left as they are,
and the conflict is reported with the worker's diff, never silently overwritten.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from whiz.agent.editing.edits import FileChange, apply_changes, unified_diff
from whiz.agent.editing.undo import UndoStore
from whiz.agent.project.workspace import Workspace
from whiz.environments.git import run_outside_repositories

MERGE_TIMEOUT_S = 30.0


@dataclass
class MergeConflict:
    path: str
    reason: str


@dataclass
class MergeResult:
    """What merging one task did: `merged` (files written), `unchanged`, or `conflict` (nothing written)."""

    task_id: str
    status: str
    paths: list[str] = field(default_factory=list)
    conflicts: list[MergeConflict] = field(default_factory=list)
    diff: str = ""
    """The task's own changes (base to theirs): what to apply by hand after a conflict."""

    def item(self) -> dict:
        return {
            "task_id": self.task_id,
            "status": self.status,
            "paths": self.paths,
            "conflicts": [vars(c) for c in self.conflicts],
            "diff": self.diff,
        }


def merge_text(base: str, ours: str, theirs: str) -> str | None:
    """A line-level three-way merge with `git merge-file`; None when the changes overlap (or git is
    missing, in which case two different changes to one file count as overlapping)."""
    with tempfile.TemporaryDirectory(prefix="whiz-merge-") as tmp:
        paths = []
        for name, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(tmp) / name
            path.write_bytes(text.encode("utf-8"))
            paths.append(str(path))
        # merge-file exits with the number of conflicts, so any conflict reads as None too
        done = run_outside_repositories(Path(tmp), "merge-file", "-p", *paths, timeout=MERGE_TIMEOUT_S)
    return None if done is None else done.stdout.decode("utf-8")


def three_way(base: str | None, ours: str | None, theirs: str | None) -> tuple[str | None, str | None]:
    """(the merged text, None) or (None, why it conflicts). None as text means the file is absent."""
    if theirs == base:
        return ours, None
    if ours in (base, theirs):
        return theirs, None
    if base is None or ours is None or theirs is None:
        return None, "created or deleted on one side and changed on the other"
    merged = merge_text(base, ours, theirs)
    if merged is None:
        return None, "changed on both sides in the same lines"
    return merged, None


class Merger:
    """Merges tasks into the workspace one at a time, recording one undo turn for all of them."""

    def __init__(self, ws: Workspace, read_base, undo: UndoStore | None, turn_id: str):
        self.ws = ws
        self.read_base = read_base
        """Callable: a path's text when the swarm started, or None."""
        self.undo = undo
        self.turn_id = turn_id
        self.touched_by: dict[str, str] = {}

    def merge(self, task_id: str, theirs: dict[str, str | None]) -> MergeResult:
        """Merge one task's files (path -> text, None for deleted); all of them or none."""
        changes, conflicts, own = [], [], []
        for path, text in sorted(theirs.items()):
            base = self.read_base(path)
            own.append(FileChange(path, base, text))
            ours = self._current(path)
            merged, why = three_way(base, ours, text)
            if why is not None:
                earlier = self.touched_by.get(path)
                who = f"task {earlier}" if earlier else "the workspace (changed since the swarm started)"
                conflicts.append(MergeConflict(path, f"{who} and task {task_id}: {why}"))
            elif merged != ours:
                changes.append(FileChange(path, ours, merged))
        diff = "".join(unified_diff(c) for c in own if c.before != c.after)
        if conflicts:
            return MergeResult(task_id, "conflict", [c.path for c in conflicts], conflicts, diff)
        if not changes:
            return MergeResult(task_id, "unchanged", [], [], diff)
        if self.undo is not None:
            self.undo.record(self.turn_id, changes, self.ws)
        apply_changes(self.ws, changes)
        for c in changes:
            self.touched_by[c.path] = task_id
        return MergeResult(task_id, "merged", [c.path for c in changes], [], diff)

    def _current(self, path: str) -> str | None:
        target = self.ws.resolve(path)
        return self.ws.read_text(path) if target.is_file() else None
