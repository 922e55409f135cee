"""Reading the edits out of a model's reply text: SEARCH/REPLACE blocks, `*** Begin Patch` blocks and
(when the prompt asked for them) whole files in fences. Malformed blocks raise ParseError, whose message
tells the model what to fix."""

from __future__ import annotations

import re

from whiz.agent.editing.edits import Edit, EditError, PatchEdit, PatchHunk, SearchReplace, WholeFile

SEARCH_MARK = re.compile(r"^\s*<{5,9}\s*SEARCH\s*$")
DIVIDER_MARK = re.compile(r"^\s*={5,9}\s*$")
REPLACE_MARK = re.compile(r"^\s*>{5,9}\s*REPLACE\s*$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+.-]*)\s*$")
BEGIN_PATCH, END_PATCH = "*** Begin Patch", "*** End Patch"
ADD, UPDATE, DELETE, MOVE = "*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"
END_OF_FILE = "*** End of File"
# Bare names that are files although they have no dot.
DOTLESS_FILES = frozenset(
    {"Makefile", "Dockerfile", "Procfile", "Gemfile", "Rakefile", "LICENSE", "Justfile"}
)

BLOCK_FORMAT = (
    "Write each edit as: the file path alone on a line, then\n"
    "<<<<<<< SEARCH\n(lines copied exactly from the file)\n=======\n(the new lines)\n>>>>>>> REPLACE"
)


class ParseError(EditError):
    """A malformed edit block in the model's reply; the message says what is wrong and how to write it."""

    code = "malformed_edit"


def parse_edits(text: str, *, whole_files: bool = False) -> list[Edit]:
    """All edits in `text`, in order. Text around the blocks is ignored.

    With `whole_files`, a path line followed by a fenced code block is a whole-file rewrite; leave it
    off unless the prompt told the model to write files that way, since replies also quote code.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    edits: list[Edit] = []
    last_path: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == BEGIN_PATCH:
            end = next((k for k in range(i + 1, len(lines)) if lines[k].strip() == END_PATCH), None)
            if end is None:
                raise ParseError(
                    f"The patch that starts on line {i + 1} has no '{END_PATCH}' line. "
                    f"End every patch with '{END_PATCH}' on its own line."
                )
            edits += parse_patch(lines[i + 1 : end], first_line=i + 2)
            i = end + 1
        elif SEARCH_MARK.match(line):
            path = _path_before(lines, i) or last_path
            if path is None:
                raise ParseError(
                    f"The SEARCH block on line {i + 1} has no file path before it.\n{BLOCK_FORMAT}"
                )
            search, replace, i = _search_block(lines, i, path)
            edits.append(SearchReplace(path, search, replace))
            last_path = path
        elif REPLACE_MARK.match(line):
            raise ParseError(
                f"Line {i + 1} has '>>>>>>> REPLACE' without a '<<<<<<< SEARCH' line before it.\n"
                + BLOCK_FORMAT
            )
        elif whole_files and FENCE.match(line):
            i = _whole_file(lines, i, edits)
        else:
            i += 1
    return edits


def _search_block(lines: list[str], start: int, path: str) -> tuple[str, str, int]:
    """The SEARCH and REPLACE texts of the block whose marker is on line `start`, and the line after it."""
    where = f"The SEARCH block for {path} on line {start + 1}"
    i = start + 1
    search: list[str] = []
    while i < len(lines) and not DIVIDER_MARK.match(lines[i]):
        if SEARCH_MARK.match(lines[i]) or REPLACE_MARK.match(lines[i]):
            raise ParseError(
                f"{where} has no '=======' line between its SEARCH and REPLACE parts.\n{BLOCK_FORMAT}"
            )
        search.append(lines[i])
        i += 1
    if i == len(lines):
        raise ParseError(f"{where} has no '=======' line; the reply ended first.\n{BLOCK_FORMAT}")
    i += 1
    replace: list[str] = []
    while i < len(lines) and not REPLACE_MARK.match(lines[i]):
        if SEARCH_MARK.match(lines[i]):
            raise ParseError(f"{where} has no '>>>>>>> REPLACE' line before the next block.\n{BLOCK_FORMAT}")
        replace.append(lines[i])
        i += 1
    if i == len(lines):
        replace = _unterminated(replace)
        if replace is None:
            raise ParseError(f"{where} has no '>>>>>>> REPLACE' line; the reply ended first.\n{BLOCK_FORMAT}")
    return _text(search), _text(replace), i + 1


def _unterminated(replace: list[str]) -> list[str] | None:
    """The REPLACE part of the reply's last block when the reply ended without '>>>>>>> REPLACE'.

    Small models often end a file they write this way, or wrap the new text in a code fence and
    stop: the reply was complete (a reply cut off by its limit never gets here), so the new text
    is what they meant. A fenced REPLACE ends at its fence's close (words after it are not code),
    an unfenced one at the end of the reply, less a last line that closes a fence opened before
    the block (the fence the model meant around it: fence lines in the part then come in an odd
    number). None when there is no text, or a fence never closes.
    """
    body = list(replace)
    while body and not body[-1].strip():
        body.pop()
    if body and (opened := FENCE.match(body[0])):
        close = next((k for k in range(1, len(body)) if _closes(body[k], opened.group(1))), None)
        if close is None:
            return None
        body = body[1:close]
    elif body and is_bare_fence(body[-1]) and sum(bool(FENCE.match(line)) for line in body) % 2:
        body.pop()
    return body if any(line.strip() for line in body) else None


def _whole_file(lines: list[str], start: int, edits: list[Edit]) -> int:
    """Read a fenced whole file opening on line `start` into `edits`; returns the line to go on from."""
    fence = FENCE.match(lines[start]).group(1)
    close = next((k for k in range(start + 1, len(lines)) if _closes(lines[k], fence)), None)
    body = lines[start + 1 : close]
    # A fence around SEARCH/REPLACE blocks or a patch is not a file: read what is inside it instead.
    if any(SEARCH_MARK.match(x) or x.strip() == BEGIN_PATCH for x in body):
        return start + 1
    path = _path_before(lines, start)
    if path is None:
        return (close if close is not None else start) + 1
    if close is None:
        raise ParseError(f"The code block for {path} on line {start + 1} is not closed with {fence}.")
    edits.append(WholeFile(path, _text(body)))
    return close + 1


def is_bare_fence(line: str) -> bool:
    """A fence line with no language after it: one that can close a fence."""
    found = FENCE.match(line)
    return found is not None and not found.group(2)


def _closes(line: str, fence: str) -> bool:
    mark = line.strip()
    return len(mark) >= len(fence) and mark == fence[0] * len(mark)


def parse_patch(body: list[str], first_line: int = 1) -> list[PatchEdit]:
    """The file operations between `*** Begin Patch` and `*** End Patch` (the Codex CLI format).

    `first_line` is the reply's line number of body[0], for messages.
    """
    ops: list[PatchEdit] = []
    i = 0
    while i < len(body):
        line = body[i].strip()
        if not line:
            i += 1
        elif line.startswith(ADD):
            path = _patch_path(line, ADD, first_line + i)
            i += 1
            content = []
            while i < len(body) and body[i].startswith("+"):
                content.append(body[i][1:])
                i += 1
            ops.append(PatchEdit("add", path, content=_text(content)))
        elif line.startswith(DELETE):
            ops.append(PatchEdit("delete", _patch_path(line, DELETE, first_line + i)))
            i += 1
        elif line.startswith(UPDATE):
            op, i = _update(body, i, first_line)
            ops.append(op)
        else:
            raise ParseError(
                f"Line {first_line + i} of the reply, {body[i]!r}, is not a patch file operation. "
                f"Start each one with '{ADD} <path>', '{UPDATE} <path>' or '{DELETE} <path>'; "
                "in an Add File every line starts with '+'."
            )
    if not ops:
        raise ParseError(f"The patch on line {first_line - 1} is empty: it has no file operations.")
    return ops


def _update(body: list[str], i: int, first_line: int) -> tuple[PatchEdit, int]:
    """One `*** Update File` with its optional `*** Move to` and its hunks; returns it and the next line."""
    path = _patch_path(body[i].strip(), UPDATE, first_line + i)
    op = PatchEdit("update", path)
    i += 1
    if i < len(body) and body[i].strip().startswith(MOVE):
        op.move_to = _patch_path(body[i].strip(), MOVE, first_line + i)
        i += 1
    while i < len(body):
        line = body[i]
        if line.strip() == END_OF_FILE:
            if not op.hunks:
                raise ParseError(f"Line {first_line + i}: '{END_OF_FILE}' must come after a hunk's lines.")
            op.hunks[-1].end_of_file = True
        elif line.startswith("***"):
            break
        elif line.startswith("@@"):
            op.hunks.append(PatchHunk([], [], context=line[2:].strip() or None))
        elif not line and _before_marker(body, i):
            pass  # blank lines before the next hunk or file operation separate; they are not context
        elif line == "" or line[0] in " -+":
            if not op.hunks:
                op.hunks.append(PatchHunk([], []))  # the first hunk may leave out its '@@'
            hunk = op.hunks[-1]
            if line[:1] != "+":
                hunk.old_lines.append(line[1:])
            if line[:1] != "-":
                hunk.new_lines.append(line[1:])
        else:
            raise ParseError(
                f"Line {first_line + i} of the reply, {line!r}, in '{UPDATE} {path}' does not start with "
                "' ' (an unchanged line), '-' (a removed line), '+' (an added line) or '@@'."
            )
        i += 1
    if not any(h.old_lines != h.new_lines for h in op.hunks):
        raise ParseError(f"'{UPDATE} {path}' changes nothing: give '-' lines to remove and '+' lines to add.")
    return op, i


def _before_marker(body: list[str], i: int) -> bool:
    """Whether only blank lines stand between line `i` and the next '@@' or '***' line (or the end)."""
    while i < len(body) and not body[i].strip():
        i += 1
    return i == len(body) or body[i].startswith(("@@", "***"))


def _patch_path(line: str, marker: str, line_no: int) -> str:
    path = line[len(marker) :].strip()
    if not path:
        raise ParseError(f"Line {line_no}: '{marker}' needs a file path after it.")
    return path


def _path_before(lines: list[str], i: int) -> str | None:
    """The file path on the line before line `i` (skipping blank lines and an opening fence), if any."""
    j = _prev_filled(lines, i - 1)
    if j >= 0 and FENCE.match(lines[j]):
        j = _prev_filled(lines, j - 1)  # "```python" opens the block; the path is above it
    if j < 0:
        return None
    # "src/app.py", "# src/app.py", "**src/app.py**", or prose naming it: "And in `src/app.py`:",
    # or, unquoted, as the last word before the colon that leads into the block: "In src/app.py:"
    # (the form the task's own attached files take, `path:` above their block).
    quoted = [_as_path(name) for name in re.findall(r"`([^`\s]+)`", lines[j])]
    named = next((name for name in reversed(quoted) if name), None)
    lead_in = re.search(r"(?:^|\s)\**(\S+?):[*\s]*$", lines[j])
    return _as_path(lines[j]) or named or (_as_path(lead_in.group(1)) if lead_in else None)


def _prev_filled(lines: list[str], j: int) -> int:
    while j >= 0 and not lines[j].strip():
        j -= 1
    return j


def _as_path(line: str) -> str | None:
    """`line` as a file path, with markdown decoration ('# ', '**', backticks, 'File:') removed; or None."""
    text = line.strip().lstrip("#").strip()
    text = re.sub(r"^(?:file|path|filename)\s*:\s*", "", text, flags=re.IGNORECASE)
    text = text.strip("*`'\"").rstrip(":").strip("*`'\" ")
    if not text or len(text) > 255 or re.search(r"\s", text) or text[0] in "<=>`~":
        return None
    name = text.rsplit("/", 1)[-1]
    return text if ("." in name.strip(".") or name in DOTLESS_FILES or "/" in text) and name else None


def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)
