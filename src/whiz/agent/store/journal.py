"""A write-ahead journal for edits that change several files: after a crash, each edit is either finished
or taken back as a whole, so the project never holds half of one.

Before any file of the project is touched, `apply_changes` records every target, the temporary file
that will hold its new text, the hashes of its old and new text, and the old text itself, in one JSON
file outside the project (WHIZ_HOME/journal: the project stays clean, and git's folder is never written).
Only then are the new texts written and renamed into place; the journal is deleted last. `recover`,
run when whiz starts, finds the journals a crash left behind and resolves each one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import SKIP_DIRS, Workspace, is_git_name
from whiz.agent.store.durable import (
    LEFTOVER,
    digest_of,
    fsync_dir,
    remove_durably,
    replace_durably,
    write_temp,
)
from whiz.agent.store.sessions import data_home

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; recovery then trusts that no other whiz is writing.
    fcntl = None  # type: ignore[assignment]

Step = Callable[[str], None]


def default_journal_dir() -> Path:
    """Where journals live unless told otherwise: WHIZ_HOME/journal (the user data dir without it)."""
    return data_home() / "journal"


@dataclass
class Entry:
    """One file of a journaled write."""

    path: str
    """Relative to the root, symlinks resolved."""
    temp: str | None
    """Name of the temporary file beside it that holds the new text; None when the write deletes it."""
    before: str | None
    """The old text, to put back; None when the file did not exist."""
    before_sha256: str | None
    after_sha256: str | None
    mode: int | None
    """The old permission bits, kept when the old text is put back."""


@dataclass
class Journal:
    """What one multi-file write is about to do, written before the write begins."""

    root: Path
    entries: list[Entry]
    made_dirs: list[str] = field(default_factory=list)
    """Folders the write creates for new files, outermost first, removed again if it is taken back."""
    file: Path | None = None
    at: str = ""
    """The file being written when a write fails, for its error message."""

    def write(self, journal_dir: Path, step: Step) -> None:
        """Put the journal on disk atomically: a crash leaves it whole or absent."""
        journal_dir.mkdir(parents=True, exist_ok=True)
        self.file = journal_dir / f"{_root_key(self.root)}-{secrets.token_hex(6)}.json"
        body = {
            "root": str(self.root),
            "made_dirs": self.made_dirs,
            "entries": [asdict(entry) for entry in self.entries],
        }
        temp = write_temp(self.file, json.dumps(body).encode("utf-8"), temp=self.file.with_suffix(".tmp"))
        step("journal written")
        os.replace(temp, self.file)
        fsync_dir(journal_dir)

    def remove(self) -> None:
        """Forget the journal: the write it describes is complete (or wholly taken back)."""
        if self.file is not None:
            remove_durably(self.file)

    @classmethod
    def load(cls, file: Path) -> Journal:
        body = json.loads(file.read_text(encoding="utf-8"))
        entries = [Entry(**entry) for entry in body["entries"]]
        return cls(Path(body["root"]), entries, body["made_dirs"], file)

    def target(self, entry: Entry) -> Path:
        return self.root / entry.path

    def temp(self, entry: Entry) -> Path | None:
        return self.target(entry).with_name(entry.temp) if entry.temp else None

    def is_new(self, entry: Entry) -> bool:
        """Whether the file holds the new text (or is gone, for a deletion)."""
        return digest_of(self.target(entry)) == entry.after_sha256

    def is_old(self, entry: Entry) -> bool:
        return digest_of(self.target(entry)) == entry.before_sha256

    def can_finish(self) -> bool:
        """Whether every file not yet placed has its whole new text waiting in its temporary file."""
        for entry in self.entries:
            temp = self.temp(entry)
            if not self.is_new(entry) and temp is not None and digest_of(temp) != entry.after_sha256:
                return False
        return True

    def roll_forward(self, step: Step) -> None:
        """Place every new text not yet in place, and make the renames durable."""
        for entry in self.entries:
            temp = self.temp(entry)
            if self.is_new(entry):
                if temp is not None:
                    with contextlib.suppress(FileNotFoundError):
                        temp.unlink()
                continue
            self.at = entry.path
            if temp is None:
                self.target(entry).unlink()
            else:
                os.replace(temp, self.target(entry))
            step(f"placed {entry.path}")
        for folder in {self.target(entry).parent for entry in self.entries}:
            fsync_dir(folder)
        step("placed all")

    def roll_back(self) -> list[str]:
        """Put every file back as it was; returns the paths it could not put back (normally none).

        Temporary files go first: should this be cut short, `recover` then finds new text missing and
        takes the rest back as well, instead of finishing what was being taken back.
        """
        for entry in self.entries:
            temp = self.temp(entry)
            if temp is not None:
                with contextlib.suppress(OSError):
                    temp.unlink()
        stuck = []
        for entry in reversed(self.entries):
            if not self.is_new(entry) or self.is_old(entry):
                continue
            try:
                if entry.before is None:
                    remove_durably(self.target(entry))
                else:
                    replace_durably(self.target(entry), entry.before.encode("utf-8"), entry.mode)
            except OSError:
                stuck.append(entry.path)
        for rel in reversed(self.made_dirs):
            with contextlib.suppress(OSError):
                (self.root / rel).rmdir()  # only if empty: a file the user put there since stays
        return stuck


@contextlib.contextmanager
def workspace_lock(root: Path, *, exclusive: bool = False) -> Iterator[None]:
    """Writes hold this shared and `recover` exclusively, so recovery never mistakes a write that is
    still running in another whiz for one a crash left behind. A flock on the project folder itself:
    it writes nothing, and the kernel releases it when its process dies, however it dies."""
    if fcntl is None:
        yield
        return
    try:
        fd = os.open(root, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def recover(workspace_root: Path, journal_dir: Path | None = None) -> list[str]:
    """Resolve every write to this workspace that a crash interrupted, and sweep up the temporary files
    whiz writes beside files; returns one sentence per thing done (empty when there was nothing).

    A journal whose new texts are all whole on disk is finished (rolled forward); any other is taken
    back. Finishing is safe once every new text is durable: the edit was approved, the undo record was
    kept before it began (so `/undo` can still take it back), and no work is lost either way. Without a
    whole new text for some file, the old texts, kept in the journal, are the only complete state.
    A file that matches neither its old nor its new text was changed by someone since: it is left alone.
    Journals of projects that no longer exist (a heal's throwaway copies) are dropped on the way.
    """
    ws = Workspace(workspace_root)
    journal_dir = Path(journal_dir) if journal_dir is not None else default_journal_dir()
    done: list[str] = []
    with workspace_lock(ws.root, exclusive=True):
        if journal_dir.is_dir():
            for file in sorted(journal_dir.glob(f"{_root_key(ws.root)}-*")):
                try:
                    done += _resolve_journal(ws, file)
                except OSError as exc:  # whiz must still start: the journal stays for the next time
                    done.append(f"Could not resolve the interrupted edit in {file}: {exc}; will retry.")
            _drop_orphans(journal_dir)
        done += _sweep(ws)
    return done


def _drop_orphans(journal_dir: Path) -> None:
    for file in journal_dir.glob("*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            if not Path(json.loads(file.read_text(encoding="utf-8"))["root"]).exists():
                file.unlink()


def _resolve_journal(ws: Workspace, file: Path) -> list[str]:
    if file.suffix == ".tmp":  # cut short while being written: nothing in the project was touched yet
        file.unlink()
        return []
    try:
        journal = Journal.load(file)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"Ignored an unreadable journal {file}: {exc}."]
    if journal.root != ws.root:
        return []
    usable, done = [], []
    for entry in journal.entries:
        try:
            confined = ws.resolve(entry.path) == journal.target(entry)
        except WhizAgentError:
            confined = False
        if not confined:
            done.append(f"Left {entry.path} alone: the journal names a path whiz may not write.")
        elif not (journal.is_new(entry) or journal.is_old(entry)):
            done.append(f"Left {entry.path} alone: it changed since the interrupted edit.")
        else:
            usable.append(entry)
    journal.entries = usable
    names = ", ".join(entry.path for entry in usable)
    if journal.can_finish():
        journal.roll_forward(lambda _: None)
        outcome = f"Finished an edit a crash interrupted; these files have their new text: {names}."
    else:
        stuck = journal.roll_back()
        if stuck:
            return [*done, f"Could not take back an interrupted edit of {', '.join(stuck)}; will retry."]
        outcome = f"Took back an edit a crash interrupted; these files have their old text: {names}."
    journal.remove()
    return [*done, outcome] if usable else done


def _sweep(ws: Workspace) -> list[str]:
    """Remove the temporary files a crash left beside files. An original an older whiz set aside
    (`.whiz-bak-`) whose file is missing is the only copy of that file: it is put back, not removed."""
    done = []
    for folder, dirs, files in os.walk(ws.root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not is_git_name(d)]
        for name in files:
            match = LEFTOVER.match(name)
            if match is None:
                continue
            path = Path(folder) / name
            target = path.with_name(name[1 : match.start(1) - len(".whiz-")])
            rel = ws.relative(path)
            with contextlib.suppress(OSError):
                if match.group(1) == "bak" and not target.exists():
                    os.replace(path, target)
                    done.append(f"Put back {ws.relative(target)}, which a crash had left aside as {rel}.")
                else:
                    path.unlink()
                    done.append(f"Removed {rel}, a temporary file a crash left behind.")
    return done


def _root_key(root: Path) -> str:
    return hashlib.sha256(str(root).encode("utf-8")).hexdigest()[:16]
