"""A file's text on the other side of a unified diff. ACP shows an edit as the file's old and new
text (`tool_diff_content`); whiz's `file_change` item carries the diff, and the file holds one side
of it (the new text once applied, the old one when declined), so the other is worked out here."""

from __future__ import annotations

import re

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class DiffMismatch(ValueError):
    """The diff does not fit the text it was applied to."""


def other_side(text: str, diff: str, *, reverse: bool) -> str:
    """`text` with `diff` applied (reverse: taken back, giving the text before it)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    at = 0  # index into `lines`
    hunk_lines: list[str] = []
    for line in diff.splitlines(keepends=True):
        if line.startswith(("--- ", "+++ ")) and not hunk_lines:
            continue
        hunk_lines.append(line)
    hunks = _hunks(hunk_lines)
    for start_old, start_new, body in hunks:
        start = (start_new if reverse else start_old) - 1
        start = max(start, 0)
        if start < at:
            raise DiffMismatch("hunks overlap")
        out += lines[at:start]
        at = start
        for sign, content in body:
            ours = "+" if reverse else "-"
            theirs = "-" if reverse else "+"
            if sign in (" ", ours):
                if at >= len(lines) or lines[at] != content:
                    raise DiffMismatch(f"line {at + 1} differs from the diff")
                at += 1
                if sign == " ":
                    out.append(content)
            elif sign == theirs:
                out.append(content)
    out += lines[at:]
    return "".join(out)


def _hunks(lines: list[str]) -> list[tuple[int, int, list[tuple[str, str]]]]:
    """(old start, new start, [(sign, line)]) per hunk; a `\\ No newline` marker takes the newline
    off the line before it."""
    hunks: list[tuple[int, int, list[tuple[str, str]]]] = []
    for line in lines:
        if match := HUNK.match(line):
            old = int(match.group(1)) if match.group(2) != "0" else int(match.group(1)) + 1
            new = int(match.group(3)) if match.group(4) != "0" else int(match.group(3)) + 1
            hunks.append((old, new, []))
        elif line.startswith("\\") and hunks and hunks[-1][2]:
            sign, content = hunks[-1][2][-1]
            hunks[-1][2][-1] = (sign, content.rstrip("\n"))
        elif hunks and line[:1] in (" ", "+", "-"):
            hunks[-1][2].append((line[0], line[1:]))
    return hunks
