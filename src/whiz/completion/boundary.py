"""Where a completion ends, and what of it is shown.

An editor shows a completion as ghost text at the cursor, so it should be a piece the user can take
whole: the rest of the line when the cursor's line already has text, or else a block that ends
where the code dedents below the cursor's indentation. It never repeats what already follows the
cursor: the rest of the line (`foo(|)` completes to `a, b`, not `a, b)`) or the next line.

`Boundary.end` is asked after every token, so a completion stops as soon as it is complete;
`Boundary.shown` is the text to send, and `Boundary.settled` how much of it can be streamed before
the end is known (a line is held back until the next one shows whether it belongs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OPENERS = (":", "{", "(", "[")
CLOSERS = ")]}"
_TRAILING_BLANK_LINES = re.compile(r"(\n[ \t]*)+\Z")


def indent(line: str) -> int:
    """Columns of leading whitespace (a tab counts four)."""
    expanded = line.expandtabs(4)
    return len(expanded) - len(expanded.lstrip(" "))


def _balance(text: str) -> int:
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in CLOSERS)


@dataclass(frozen=True)
class Cursor:
    """The text around the cursor that decides a completion's shape."""

    line_before: str
    """The cursor's line up to the cursor."""
    line_after: str
    """The rest of the cursor's line."""
    next_line: str | None
    """The first line after the cursor's line that is not blank."""

    @classmethod
    def at(cls, before: str, after: str) -> Cursor:
        rest = after.split("\n", 51)
        following = next((x for x in rest[1:51] if x.strip()), None)
        return cls(before.rsplit("\n", 1)[-1], rest[0], following)


class Boundary:
    """The stop and trim rules for one completion at `cursor`.

    `n_indent` is llama.cpp's: no line after the first may be indented less than that many columns.
    """

    def __init__(self, cursor: Cursor, *, n_indent: int = 0):
        self.cursor = cursor
        self.n_indent = n_indent
        self.line_mode = bool(cursor.line_before.strip() or cursor.line_after.strip())
        """The cursor's line has text: complete that line only (unless it is complete already)."""

    def end(self, text: str) -> int | None:
        """Where in `text` (the output so far) the completion ends, or None while it may go on."""
        lines = text.split("\n")
        first = self.cursor.line_before + lines[0]
        if len(lines) > 1 and self._repeats_next(first):
            return 0
        if self.line_mode and len(lines) > 1 and (lines[0].strip() or self.cursor.line_after.strip()):
            return len(lines[0])
        # A blank line's completion is a block; so is one after a line that was complete ("def f():|").
        return self._block_end(first, lines)

    def _block_end(self, first: str, lines: list[str]) -> int | None:
        base = indent(first if first.strip() else self.cursor.line_before)
        # After "def f():|" the block is the body: it ends back at the cursor line's indentation.
        opened = self.line_mode and first.rstrip().endswith(OPENERS)
        at = len(lines[0]) + 1  # where lines[i] starts in the text
        seen_blank = False
        for i in range(1, len(lines)):
            line, complete = lines[i], i < len(lines) - 1
            start, at = at, at + len(line) + 1
            if not line.strip():
                seen_blank = seen_blank or complete
                continue
            width = indent(line)
            if width < base or width < self.n_indent:
                return start - 1
            if opened and width == base:
                if line.lstrip()[0] in CLOSERS:  # a block's closing bracket belongs to it
                    return start + len(line) if complete else None
                return start - 1
            if base == 0 and not opened and seen_blank:
                return start - 1  # at the top level, a block is one paragraph
            if complete and self._repeats_next(line):
                return start - 1
            seen_blank = False
        return None

    def _repeats_next(self, line: str) -> bool:
        nxt = self.cursor.next_line
        return nxt is not None and bool(line.strip()) and line.rstrip() == nxt.rstrip()

    def shown(self, text: str) -> str:
        """The completion to show for the whole output `text`: cut at its end, trimmed."""
        end = self.end(text)
        if end is not None:
            text = text[:end]
        text = _TRAILING_BLANK_LINES.sub("", text)
        if not text.strip():
            return ""
        if "\n" not in text:
            text = self._without_rest_of_line(text)
        return text

    def _without_rest_of_line(self, out: str) -> str:
        """`out` less the rest of the cursor's line where it ends by writing that again."""
        after = self.cursor.line_after.rstrip()
        for k in range(len(after), 0, -1):
            overlap = after[:k]
            if not out.endswith(overlap):
                continue
            trimmed = out[: len(out) - k]
            if any(c.isalnum() for c in overlap) or not any(c in "()[]{}" for c in overlap):
                return trimmed
            # Only brackets and punctuation: trim when that balances the line ("foo(|)" + "x)").
            line = self.cursor.line_before + "{}" + self.cursor.line_after
            if abs(_balance(line.format(trimmed))) < abs(_balance(line.format(out))):
                return trimmed
        return out

    def settled(self, text: str) -> int:
        """How much of `shown(text)` is certain while more output may follow: the complete lines
        up to the last one with text, without its newline while the next line may yet end the
        block; with it once that line has text inside the block and cannot repeat the file's next
        line (so a client sees each line end as soon as it is sure)."""
        if self.line_mode and "\n" not in text:
            return 0
        last_nl = text.rfind("\n")
        head = text[: last_nl + 1] if last_nl >= 0 else ""
        head = _TRAILING_BLANK_LINES.sub("", head.rstrip("\n") + "\n") if head else ""
        ready = len(head.rstrip("\n")) if head.strip() else 0
        tail = text[last_nl + 1 :]
        if ready and tail.strip() and self.end(text) is None and not self._may_repeat_next(tail):
            return last_nl + 1
        return ready

    def _may_repeat_next(self, partial: str) -> bool:
        nxt = self.cursor.next_line
        return nxt is not None and nxt.rstrip().startswith(partial.rstrip())
