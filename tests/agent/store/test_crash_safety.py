"""Crash safety of a multi-file edit: kill -9 at every step of `apply_changes`, then `recover`.

Each run happens in a child process that kills itself (SIGKILL: no cleanup, no finally) right after
step k, for every k. Whatever k is, each file must be wholly old or wholly new, never missing nor
partial; after `recover` the whole set is old or new, and no temporary file or journal is left.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from whiz.agent.editing.edits import (
    PatchEdit,
    SearchReplace,
    WholeFile,
    _apply_changes,
    apply_changes,
    plan_edits,
)
from whiz.agent.project.workspace import Workspace
from whiz.agent.store.durable import LEFTOVER
from whiz.agent.store.journal import recover

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

OLD = {
    "a.txt": (b"alpha\nbeta\n", 0o640),
    "b.txt": (b"to be deleted\n", 0o600),
    "sub/d.txt": (b"one\r\ntwo\r\n", 0o644),
    "run.sh": (b"#!/bin/sh\necho old\n", 0o755),
}
EDITS = [
    SearchReplace("a.txt", "beta\n", "BETA\n"),
    PatchEdit("delete", "b.txt"),
    PatchEdit("add", "new/deep/c.txt", content="created\n"),
    SearchReplace("sub/d.txt", "two\n", "TWO\n"),
    WholeFile("run.sh", "#!/bin/sh\necho new\n"),
]

# The child: plan the edits, then apply them, killing itself after step `crash_at` (-1: never),
# and print how many steps there were.
CHILD = """
import os, signal, sys
from pathlib import Path
from whiz.agent.editing.edits import _apply_changes, plan_edits
from test_crash_safety import EDITS
from whiz.agent.project.workspace import Workspace

root, journal_dir, crash_at = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
steps = []

def step(name):
    steps.append(name)
    if len(steps) - 1 == crash_at:
        os.kill(os.getpid(), signal.SIGKILL)

ws = Workspace(Path(root))
_apply_changes(ws, plan_edits(ws, EDITS), journal_dir, step)
print(len(steps))
"""


def make_project(root: Path) -> None:
    for rel, (data, mode) in OLD.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)


def tree(root: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every file (bytes, mode) and folder (None) below `root`."""
    found: dict[str, tuple[bytes, int] | None] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        found[rel] = (path.read_bytes(), path.stat().st_mode & 0o777) if path.is_file() else None
    return found


def run_child(root: Path, journal_dir: Path, crash_at: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(journal_dir), str(crash_at)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def expected(tmp_path: Path) -> tuple[dict, dict]:
    """The project's tree before the edits and after them (applied without a crash)."""
    root = tmp_path / "reference"
    root.mkdir()
    make_project(root)
    old = tree(root)
    ws = Workspace(root)
    apply_changes(ws, plan_edits(ws, EDITS), journal_dir=tmp_path / "reference-journal")
    return old, tree(root)


def test_a_kill_at_any_step_leaves_whole_files_and_recover_makes_the_set_consistent(
    tmp_path: Path, expected: tuple[dict, dict]
) -> None:
    old, new = expected
    assert old != new
    journal_dir = tmp_path / "journal"
    counted = run_child(_fresh(tmp_path / "count"), journal_dir, -1)
    assert counted.returncode == 0, counted.stderr
    total = int(counted.stdout)
    assert total >= 10  # journal, folders, four new texts, five placements, journal removed

    outcomes = set()
    for crash_at in range(total):
        root = _fresh(tmp_path / f"crash-{crash_at}")
        done = run_child(root, journal_dir, crash_at)
        assert done.returncode == -signal.SIGKILL, (crash_at, done.stderr)

        # Right after the kill: every file is old or new as a whole, and none is missing.
        now = {rel: item for rel, item in tree(root).items() if not LEFTOVER.match(Path(rel).name)}
        for rel in old.keys() | new.keys():
            if old.get(rel) is not None or new.get(rel) is not None:  # a file, not a folder
                assert now.get(rel) in (old.get(rel), new.get(rel)), (crash_at, rel, now.get(rel))

        report = recover(root, journal_dir)
        after = tree(root)
        assert after in (old, new), (crash_at, report, after)
        assert not [rel for rel in after if ".whiz-" in rel]
        assert list(journal_dir.iterdir()) == []
        assert recover(root, journal_dir) == []  # nothing left to do the second time
        outcomes.add("new" if after == new else "old")
    # Early kills are taken back and late ones finished: both paths of recover ran.
    assert outcomes == {"old", "new"}


def test_a_partial_new_text_makes_recover_take_back_files_already_placed(
    tmp_path: Path, expected: tuple[dict, dict]
) -> None:
    old, _ = expected
    journal_dir = tmp_path / "journal"
    counted = run_child(_fresh(tmp_path / "count"), journal_dir, -1)
    placed_first = _step_index(tmp_path, journal_dir, "placed a.txt")
    assert placed_first < int(counted.stdout)
    root = _fresh(tmp_path / "proj")
    assert run_child(root, journal_dir, placed_first).returncode == -signal.SIGKILL
    assert (root / "a.txt").read_bytes() == b"alpha\nBETA\n"
    # One new text still waiting is damaged (a disk error, or someone truncated it): it cannot be finished.
    waiting = next(path for path in root.rglob("*") if LEFTOVER.match(path.name))
    waiting.write_bytes(waiting.read_bytes()[:3])
    other = _fresh(tmp_path / "other")
    assert recover(other, journal_dir) == []  # another project's journal is not its business
    assert len(list(journal_dir.iterdir())) == 1
    report = recover(root, journal_dir)
    assert tree(root) == old
    assert any("Took back" in line for line in report)


def test_recover_leaves_a_file_changed_since_the_crash_alone(tmp_path: Path) -> None:
    journal_dir = tmp_path / "journal"
    root = _fresh(tmp_path / "proj")
    at = _step_index(tmp_path, journal_dir, "placed a.txt")
    assert run_child(root, journal_dir, at).returncode == -signal.SIGKILL
    (root / "a.txt").write_bytes(b"the user's own text\n")
    report = recover(root, journal_dir)
    assert (root / "a.txt").read_bytes() == b"the user's own text\n"
    assert any("Left a.txt alone" in line for line in report)
    assert list(journal_dir.iterdir()) == []


def test_recover_sweeps_leftovers_and_puts_back_an_original_set_aside(tmp_path: Path) -> None:
    root = _fresh(tmp_path / "proj")
    (root / "sub" / ".d.txt.whiz-tmp-0123abcd").write_bytes(b"half a new te")
    (root / ".gone.py.whiz-bak-89abcdef").write_bytes(b"the only copy\n")  # older whiz, cut short
    (root / ".a.txt.whiz-bak-00000000").write_bytes(b"stale\n")
    (root / ".notes.whiz-tmp-draft").write_bytes(b"not ours\n")
    report = recover(root, tmp_path / "journal")
    assert (root / "gone.py").read_bytes() == b"the only copy\n"
    assert (root / "a.txt").read_bytes() == OLD["a.txt"][0]
    assert sorted(p.name for p in root.rglob(".*")) == [".notes.whiz-tmp-draft"]
    assert len(report) == 3 and any("Put back gone.py" in line for line in report)


def test_recover_waits_for_a_write_still_running_in_another_whiz(
    tmp_path: Path, expected: tuple[dict, dict]
) -> None:
    _, new = expected
    root, journal_dir = _fresh(tmp_path / "proj"), tmp_path / "journal"
    started: list[threading.Thread] = []
    reports: list[list[str]] = []

    def step(name: str) -> None:
        if name == "placed a.txt":  # midway: one file new, the others not yet
            started.append(threading.Thread(target=lambda: reports.append(recover(root, journal_dir))))
            started[0].start()
            started[0].join(timeout=0.3)
            assert started[0].is_alive()  # held back by the write's lock, not resolving it

    ws = Workspace(root)
    _apply_changes(ws, plan_edits(ws, EDITS), journal_dir, step)
    started[0].join(timeout=10)
    assert reports == [[]]
    assert tree(root) == new


def test_journals_of_projects_gone_since_are_dropped(tmp_path: Path) -> None:
    journal_dir = tmp_path / "journal"
    copy = _fresh(tmp_path / "heal-copy")
    assert run_child(copy, journal_dir, _step_index(tmp_path, journal_dir, "placed a.txt")).returncode
    shutil.rmtree(copy)
    assert len(list(journal_dir.iterdir())) == 1
    recover(_fresh(tmp_path / "proj"), journal_dir)
    assert list(journal_dir.iterdir()) == []


def _fresh(root: Path) -> Path:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    make_project(root)
    return root


def _step_index(tmp_path: Path, journal_dir: Path, name: str) -> int:
    """The number of the step called `name`, learnt from an uninterrupted run that logs its steps."""
    root = _fresh(tmp_path / "steps")
    names = []
    ws = Workspace(root)
    _apply_changes(ws, plan_edits(ws, EDITS), journal_dir, names.append)
    return names.index(name)
