"""Edits the model asks for, turned into new file contents (pure), then written all at once or not at all.

`plan_edits` computes every file's new text and writes nothing; `apply_changes` writes them all or none,
even across a crash (see whiz.agent.store.journal).
Line endings are kept: a CRLF file stays CRLF, and a file keeps (or keeps lacking) its final newline.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from whiz.agent.editing.matching import (
    REINDENT_FROM_LEVEL,
    Ambiguous,
    feedback_ambiguous,
    feedback_not_found,
    find_block,
    reindent,
)
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace
from whiz.agent.store.durable import sha256, temp_beside, write_temp
from whiz.agent.store.journal import Entry, Journal, Step, default_journal_dir, workspace_lock

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class EditError(WhizAgentError):
    """An edit that cannot be applied; the message tells the model what it got wrong and how to retry."""

    code = "edit_failed"


@dataclass
class SearchReplace:
    """Replace `search` with `replace` in `path`. An empty `search` creates the file, or appends to it."""

    path: str
    search: str
    replace: str


@dataclass
class PatchHunk:
    """One `@@` section of an update: `old_lines` (found after `context`, if given) become `new_lines`."""

    old_lines: list[str]
    new_lines: list[str]
    context: str | None = None
    end_of_file: bool = False


@dataclass
class PatchEdit:
    """One file operation of a `*** Begin Patch` block: op is "add", "update" or "delete"."""

    op: str
    path: str
    content: str = ""  # the new file's text, for "add"
    hunks: list[PatchHunk] = field(default_factory=list)  # for "update"
    move_to: str | None = None  # for "update": the file's new path


@dataclass
class WholeFile:
    """Replace (or create) `path` with `content`."""

    path: str
    content: str


Edit = SearchReplace | PatchEdit | WholeFile


@dataclass
class FileChange:
    """One file's text before and after an edit; None means the file is absent."""

    path: str
    before: str | None
    after: str | None
    mode: int | None = None
    """Permission bits for the written file; None keeps the file's own (a new file gets the umask's)."""


# --- text as lines, with its line-ending conventions remembered -------------------------------------


@dataclass
class _Lines:
    lines: list[str]
    newline: str
    final_newline: bool

    @classmethod
    def split(cls, text: str) -> _Lines:
        # Only a file that is CRLF throughout is treated as CRLF; a mixed file keeps its '\r's in the lines.
        crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
        body = text.replace("\r\n", "\n") if crlf else text
        final = body.endswith("\n")
        lines = body[:-1].split("\n") if final else (body.split("\n") if body else [])
        return cls(lines, "\r\n" if crlf else "\n", final)

    def join(self) -> str:
        text = self.newline.join(self.lines)
        return text + self.newline if self.final_newline and self.lines else text


def _block_lines(text: str) -> list[str]:
    """A block of text from the model as lines: its own line endings dropped, a final newline implied."""
    text = text.replace("\r\n", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n") if text else []


# --- one edit on one file's text -----------------------------------------------------------------


def apply_search_replace(path: str, text: str | None, search: str, replace: str) -> str:
    """The new text of `path` after replacing `search` by `replace`; raises EditError with feedback."""
    if not search.strip():
        if text is None or not text:
            return replace
        doc = _Lines.split(text)
        doc.lines += _block_lines(replace)
        doc.final_newline = doc.final_newline or replace.endswith("\n")
        return doc.join()
    if text is None:
        raise EditError(
            f"File {path} does not exist, so its SEARCH text cannot be found. Check the path; "
            "to create it, leave the SEARCH section empty and put the whole file in REPLACE."
        )
    doc = _Lines.split(text)
    block = _block_lines(search)
    new_lines = _block_lines(replace)
    try:
        match = find_block(doc.lines, block)
    except Ambiguous as amb:
        raise EditError(feedback_ambiguous(path, doc.lines, block, amb.starts, "The SEARCH text")) from None
    if match is None:
        try:
            return _replace_within_line(path, doc, search, replace)
        except EditError:
            if _applied_already(doc.lines, new_lines):
                return text  # unchanged: the caller sees code written back, not a miss
            raise
    stop = match.stop
    if path.endswith(".py"):
        stop = whole_definition(doc.lines, match.start, match.stop, new_lines)
    if match.level >= REINDENT_FROM_LEVEL:
        new_lines = reindent(new_lines, block, doc.lines[match.start : match.stop])
    doc.lines[match.start : stop] = new_lines
    return doc.join()


def _applied_already(lines: list[str], new_lines: list[str]) -> bool:
    """Whether the file already holds a REPLACE text (two lines or more, in one place) whose
    SEARCH text it lacks: the edit made before, sent again. Told the tests failed after its edit,
    the 0.5B sent that same edit again, and was told that its SEARCH (the code as it was before
    it) did not match, until the turn ended on that: most turns that end on a SEARCH miss end
    this way. It is the code written back unchanged, and is told so."""
    if sum(1 for line in new_lines if line.strip()) < 2:
        return False
    try:
        return find_block(lines, new_lines) is not None
    except Ambiguous:
        return False


def whole_definition(lines: list[str], start: int, stop: int, new_lines: list[str]) -> int:
    """Where the replaced lines [start, stop) of a Python file really end: past the body of the
    definition they begin, when they are only its header and the replacement writes that body
    again.

    Small models often SEARCH for just a `def` line and REPLACE it with the whole new function:
    taken literally the old body stays below the new one, valid Python that runs the old code
    (or dead code after a return). A replacement that repeats at least half of the old body's
    lines is the definition rewritten; one that does not (a docstring added under the header,
    a new parameter) is taken as written."""
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return stop
    for node in ast.walk(tree):
        if not isinstance(node, _DEFINITIONS) or node.lineno - 1 != start or node.end_lineno is None:
            continue
        body_start = node.body[0].lineno - 1
        if stop > body_start:  # the SEARCH already reaches into the body
            return stop
        old_body = {line.strip() for line in lines[stop : node.end_lineno] if line.strip()}
        new_body = {line.strip() for line in new_lines[stop - start :] if line.strip()}
        if old_body and len(old_body & new_body) * 2 >= len(old_body):
            return node.end_lineno
        return stop
    return stop


def _replace_within_line(path: str, doc: _Lines, search: str, replace: str) -> str:
    """A search that is part of a line (a tool call's `search="foo(1)"`): an exact, unique substring."""
    body = _Lines(doc.lines, "\n", doc.final_newline).join()
    needle, found = search.replace("\r\n", "\n"), []
    replace = replace.replace("\r\n", "\n")
    if needle.endswith("\n") and "\n" not in needle[:-1] and needle not in body:
        # A SEARCH block of one line ends with its newline; the part of a line it names may not
        # (`numbers[:-1]` in `for n in numbers[:-1]:`, written by the 1.5B, was "not found").
        needle, replace = needle[:-1], replace.removesuffix("\n")
    at = body.find(needle)
    while at != -1 and len(found) < 10:
        found.append(at)
        at = body.find(needle, at + 1)
    block = _block_lines(search)
    if not found:
        raise EditError(feedback_not_found(path, doc.lines, block, "The SEARCH text"))
    if len(found) > 1:
        starts = [body.count("\n", 0, at) for at in found]
        raise EditError(feedback_ambiguous(path, doc.lines, block, starts, "The SEARCH text"))
    new = _Lines.split(body[: found[0]] + replace + body[found[0] + len(needle) :])
    return _Lines(new.lines, doc.newline, new.final_newline).join()


def apply_hunks(path: str, text: str, hunks: list[PatchHunk]) -> str:
    """The new text of `path` after the `@@` hunks of an `*** Update File`, applied top to bottom."""
    doc = _Lines.split(text)
    cursor = 0
    for number, hunk in enumerate(hunks, start=1):
        what = f"Hunk {number} of *** Update File: {path}"
        if hunk.context is not None and hunk.context.strip():
            found = find_block(doc.lines, [hunk.context], start=cursor, first_wins=True)
            if found is None:
                raise EditError(
                    f"{what}: its '@@ {hunk.context}' line is not in the file"
                    + (f" after line {cursor}" if cursor else "")
                    + ". The text after @@ must copy a line of the file (such as a def or class line)."
                    "\n" + feedback_not_found(path, doc.lines, [hunk.context], "The @@ line")
                )
            cursor = found.stop
        anchored = hunk.context is not None and bool(hunk.context.strip())
        old, new = list(hunk.old_lines), list(hunk.new_lines)
        if not old:
            at = cursor if anchored else len(doc.lines)
            doc.lines[at:at] = new
            cursor = at + len(new)
            continue
        match = _find_hunk(path, doc.lines, old, cursor, anchored, hunk.end_of_file, what)
        if match is None and len(old) > 1 and old[-1] == "" and new and new[-1] == "":
            # Models often end a hunk with a blank context line the file does not have there.
            old, new = old[:-1], new[:-1]
            match = _find_hunk(path, doc.lines, old, cursor, anchored, hunk.end_of_file, what)
        if match is None:
            raise EditError(feedback_not_found(path, doc.lines, old, f"{what} (its ' ' and '-' lines)"))
        if match.level >= REINDENT_FROM_LEVEL:
            new = reindent(new, old, doc.lines[match.start : match.stop])
        doc.lines[match.start : match.stop] = new
        cursor = match.start + len(new)
    return doc.join()


def _find_hunk(path, lines, old, cursor, anchored, end_of_file, what):
    start = max(cursor, len(lines) - len(old)) if end_of_file else cursor
    try:
        return find_block(lines, old, start=start, first_wins=anchored)
    except Ambiguous as amb:
        raise EditError(
            feedback_ambiguous(path, lines, old, amb.starts, f"{what} (its ' ' and '-' lines)")
            + " Or start the hunk with '@@ <a line just above it>', such as its def or class line."
        ) from None


def _whole_file(text: str | None, content: str) -> str:
    if text is None:
        return content
    doc = _Lines.split(text)
    lines = _block_lines(content)
    if [x.rstrip() for x in lines] == [x.rstrip() for x in doc.lines]:
        # The same code, but for trailing spaces or the final newline (a file ending without one,
        # written back with one): unchanged, not an edit that the tests are run for again.
        return text
    return _Lines(lines, doc.newline, doc.final_newline or content.endswith("\n")).join()


# --- many edits over many files ------------------------------------------------------------------


EXAMPLE_DIR = "path/to/"
"""The folder of the prompts' example paths, which small models copy in front of a real name."""
EXAMPLE_FILE = EXAMPLE_DIR + "file.py"
"""The path the instructions' SEARCH/REPLACE example edits (`prompt.TEXT_ACTIONS`)."""
EXAMPLE_SEARCH, EXAMPLE_REPLACE = "the exact lines to change, copied from the file", "the new lines"
"""The example's own SEARCH and REPLACE text."""


def echoes_example(edit: Edit) -> bool:
    """Whether `edit` is the instructions' example written back, not an edit meant for a file."""
    return isinstance(edit, SearchReplace) and edit.replace.strip() == EXAMPLE_REPLACE


def namesakes(path: str, files: list[str]) -> list[str]:
    """The files among `files` with the name of `path`, in other folders."""
    name = path.rsplit("/", 1)[-1]
    return [f for f in files if f.rsplit("/", 1)[-1] == name and f != path]


def known_path(
    path: str, exists: Callable[[str], bool], files: Callable[[], list[str]], wanted: Collection[str] = ()
) -> str:
    """Where an edit of `path`, a file that does not exist, was aimed: the one file of that name
    elsewhere in the workspace (`files()`), or a new file the task names (`wanted`) under the
    prompts' example folder ("path/to/wc.py" for "Write wc.py"), or the one file the task names
    for the example's own `path/to/file.py`. `path` itself otherwise."""
    if exists(path):
        return path
    same = namesakes(path, files())
    if len(same) == 1:
        return same[0]
    if not same and path.removeprefix(EXAMPLE_DIR) in wanted:
        return path.removeprefix(EXAMPLE_DIR)
    if path == EXAMPLE_FILE and len(wanted) == 1:  # (the callers leave out `echoes_example`)
        # The instructions' example, copied as it stands (the 1.5B did for wc.py, web and
        # tic-tac-toe): a task of one file means that file.
        return next(iter(wanted))
    return path


def aimed(
    edit: Edit, exists: Callable[[str], bool], files: Callable[[], list[str]], wanted: Collection[str] = ()
) -> Edit:
    """`edit` sent where it was meant, for a file that does not exist (`known_path`); and a
    SEARCH/REPLACE that would create a file the task names (`wanted`) is that file, from its
    REPLACE: a small model asked to "write wc.py" often writes a SEARCH of what it imagines is
    there and the program as REPLACE (refused as "does not exist" three times in a row, before).
    The instructions' example written back stays as it is, to be refused."""
    if not isinstance(edit, SearchReplace | WholeFile) or exists(edit.path) or echoes_example(edit):
        return edit
    edit = dataclasses.replace(edit, path=known_path(edit.path, exists, files, wanted))
    if (
        isinstance(edit, SearchReplace)
        and edit.search.strip()
        and edit.path in wanted
        and not exists(edit.path)
    ):
        return WholeFile(edit.path, edit.replace)
    return edit


def plan_edits(ws: Workspace, edits: list[Edit]) -> list[FileChange]:
    """Every file's text after all `edits`, in order, as changes; nothing is written.

    Raises EditError (or PathEscape) naming the edit at fault; then no edit is to be applied.
    """
    state: dict[str, str | None] = {}
    original: dict[str, str | None] = {}

    def load(rel: str) -> tuple[str, str | None]:
        key = ws.relative(ws.resolve(rel))
        if key not in state:
            path = ws.resolve(key)
            if path.is_dir():
                raise EditError(f"{rel} is a folder; an edit must name a file.")
            original[key] = state[key] = ws.read_text(key) if path.exists() else None
        return key, state[key]

    for index, edit in enumerate(edits, start=1):
        try:
            _plan_one(edit, load, state, lambda key: namesakes(key, ws.list_files()))
        except WhizAgentError as exc:
            prefix = (
                f"Edit {index} of {len(edits)} failed, so none of them was applied. "
                if len(edits) > 1
                else ""
            )
            raise type(exc)(prefix + exc.message) from None
    return [FileChange(key, original[key], after) for key, after in state.items() if after != original[key]]


def _plan_one(edit: Edit, load, state: dict[str, str | None], named_like) -> None:
    if isinstance(edit, SearchReplace):
        key, text = load(edit.path)
        if text is None and edit.search.strip() and (others := named_like(key)):
            raise EditError(
                f"File {key} does not exist, so its SEARCH text cannot be found. "
                f"Did you mean {' or '.join(others[:3])}? Put that path before the SEARCH block."
            )
        state[key] = apply_search_replace(key, text, edit.search, edit.replace)
    elif isinstance(edit, WholeFile):
        key, text = load(edit.path)
        state[key] = _whole_file(text, edit.content)
    elif edit.op == "add":
        key, text = load(edit.path)
        if text is not None:
            raise EditError(
                f"*** Add File: {key} names a file that already exists; use *** Update File: {key}."
            )
        state[key] = edit.content
    elif edit.op == "delete":
        key, text = load(edit.path)
        if text is None:
            raise EditError(f"*** Delete File: {key} names a file that does not exist.")
        state[key] = None
    elif edit.op == "update":
        key, text = load(edit.path)
        if text is None:
            raise EditError(
                f"*** Update File: {key} names a file that does not exist. "
                f"Check the path, or create it with *** Add File: {key}."
            )
        new_text = apply_hunks(key, text, edit.hunks)
        if edit.move_to is not None:
            dest, existing = load(edit.move_to)
            if dest != key:
                if existing is not None:
                    raise EditError(f"*** Move to: {dest} names a file that already exists.")
                state[key] = None
                key = dest
        state[key] = new_text
    else:
        raise EditError(f"Unknown patch operation {edit.op!r}; use Add File, Update File or Delete File.")


def unified_diff(change: FileChange) -> str:
    """The change as a unified diff (a/ b/ paths, /dev/null for an absent side)."""
    before = (change.before or "").splitlines(keepends=True)
    after = (change.after or "").splitlines(keepends=True)
    old = f"a/{change.path}" if change.before is not None else "/dev/null"
    new = f"b/{change.path}" if change.after is not None else "/dev/null"
    out = []
    for line in difflib.unified_diff(before, after, old, new):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


# --- writing: all files or none, even across a crash ----------------------------------------------


def apply_changes(ws: Workspace, changes: list[FileChange], *, journal_dir: Path | None = None) -> None:
    """Write every change, or none, even if whiz is killed midway.

    Each new text is written and fsynced beside its file, then renamed over it, so no file is ever
    missing or half-written. A journal written first (in `journal_dir`; WHIZ_HOME/journal by default)
    lets `whiz.agent.store.journal.recover` finish or take back a write a crash cut short, and a failure
    while running puts every file back. Raises EditError if a file changed on disk since it was planned.
    """
    _apply_changes(ws, changes, journal_dir or default_journal_dir(), lambda _: None)


def _apply_changes(ws: Workspace, changes: list[FileChange], journal_dir: Path, step: Step) -> None:
    """apply_changes, calling `step` after each thing it makes durable (the crash tests stop it there)."""
    targets = [ws.resolve(change.path) for change in changes]
    for change, target in zip(changes, targets, strict=True):
        current = ws.read_text(change.path) if target.is_file() else None
        if current != change.before:
            raise EditError(
                f"{change.path} changed on disk since the edit was planned; read it again and redo it."
            )
    if not changes or _written_through(ws, changes, targets):
        return
    with workspace_lock(ws.root):
        journal = _journal_for(ws, changes, targets)
        try:
            journal.write(journal_dir, step)
        except OSError as exc:
            raise EditError(
                f"Could not write the edit journal in {journal_dir}: {exc.strerror or exc}. "
                "No file was changed."
            ) from exc
        step("journal placed")
        try:
            for rel in journal.made_dirs:
                (ws.root / rel).mkdir()
                step(f"made {rel}")
            for entry, change in zip(journal.entries, changes, strict=True):
                journal.at = entry.path
                if change.after is not None:
                    mode = change.mode if change.mode is not None else entry.mode
                    write_temp(journal.target(entry), change.after.encode("utf-8"), mode, journal.temp(entry))
                    step(f"wrote {entry.path}")
            journal.roll_forward(step)
        except BaseException as exc:  # a Ctrl-C midway is taken back too, then goes on up
            stuck = journal.roll_back()
            if not stuck:
                journal.remove()
            if not isinstance(exc, OSError):
                raise
            outcome = (
                f"These files could not be put back: {', '.join(stuck)}; whiz retries when it next starts."
                if stuck
                else "No file was changed."
            )
            raise EditError(f"Could not write {journal.at}: {exc.strerror or exc}. {outcome}") from exc
        journal.remove()
        step("journal removed")


def _written_through(ws: Workspace, changes: list[FileChange], targets: list[Path]) -> bool:
    """Whether `ws.files` (an editor's buffers) took the changes instead of the disk: it does where
    every change edits a file that exists; a new or deleted file goes through the journal."""
    pairs = list(zip(changes, targets, strict=True))
    if ws.files is None or not all(c.after is not None and t.is_file() for c, t in pairs):
        return False
    for change, target in pairs:
        assert change.after is not None
        try:
            if not ws.files.write_text(target, change.after):
                return False  # it writes none: the disk takes them all
        except OSError as exc:
            raise EditError(f"Could not write {change.path}: {exc.strerror or exc}.") from exc
    return True


def _journal_for(ws: Workspace, changes: list[FileChange], targets: list[Path]) -> Journal:
    """The journal of a write: each target's old and new text (as hashes, and the old text itself)."""
    entries, made_dirs = [], []
    for change, target in zip(changes, targets, strict=True):
        before = None if change.before is None else change.before.encode("utf-8")
        after = None if change.after is None else change.after.encode("utf-8")
        entries.append(
            Entry(
                path=ws.relative(target),
                temp=temp_beside(target).name if after is not None else None,
                before=change.before,
                before_sha256=sha256(before),
                after_sha256=sha256(after),
                mode=stat.S_IMODE(target.stat().st_mode) if before is not None else None,
            )
        )
        if after is not None:
            made_dirs += [ws.relative(folder) for folder in _missing_parents(target.parent)]
    return Journal(ws.root, entries, list(dict.fromkeys(made_dirs)))


def _missing_parents(folder: Path) -> list[Path]:
    """`folder` and its parents that do not exist yet, outermost first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    return list(reversed(missing))
