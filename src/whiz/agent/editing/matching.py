"""Finding a block of lines in a file the way a small model remembers it: exact first, then ever looser.

Pure functions over lists of lines (no line endings). The cascade is
exact -> trailing whitespace ignored -> surrounding whitespace ignored -> Unicode punctuation normalised.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

# Typographic characters a model (or a word processor) writes where code has plain ASCII.
_PUNCTUATION = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u00b4", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys(
            "\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "
        ),
        **dict.fromkeys("\u200b\u200c\u200d\u2060\ufeff", ""),
        "\u2026": "...",
    }
)


def normalise_punctuation(line: str) -> str:
    """`line` with curly quotes, dashes, odd spaces and zero-width characters made plain ASCII."""
    return line.translate(_PUNCTUATION)


def _punct_strip(line: str) -> str:
    return normalise_punctuation(line).strip()


# (how the match was found, for messages; how a line is compared)
LEVELS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("exactly", lambda line: line),
    ("ignoring trailing whitespace", str.rstrip),
    ("ignoring surrounding whitespace", str.strip),
    ("after normalising Unicode punctuation", _punct_strip),
)
# From this level on the indentation may differ, so replacement lines are re-indented to the file's.
REINDENT_FROM_LEVEL = 2


@dataclass(frozen=True)
class Match:
    """Lines [start, stop) of the file matched the block at cascade `level` (an index into LEVELS)."""

    start: int
    stop: int
    level: int


class Ambiguous(Exception):
    """The block matches at several places (`starts`, line indices); it does not leave this package."""

    def __init__(self, starts: list[int], level: int):
        super().__init__(f"block found at {len(starts)} places")
        self.starts = starts
        self.level = level


def find_block(
    lines: list[str],
    block: list[str],
    *,
    start: int = 0,
    first_wins: bool = False,
    first_level: int = 0,
) -> Match | None:
    """Where `block` occurs in `lines` at or after `start`, trying each level of the cascade in turn.

    At the first level with any match: one match wins; several raise Ambiguous, unless `first_wins`
    (the caller already narrowed the place down), where the earliest wins.
    """
    if not block:
        raise ValueError("find_block needs at least one line")
    size = len(block)
    for level in range(first_level, len(LEVELS)):
        norm = LEVELS[level][1]
        wanted = [norm(line) for line in block]
        # Compare cheaply on the first line before comparing whole windows.
        starts = [
            i
            for i in range(start, len(lines) - size + 1)
            if norm(lines[i]) == wanted[0] and [norm(x) for x in lines[i : i + size]] == wanted
        ]
        if len(starts) == 1 or (starts and first_wins):
            return Match(starts[0], starts[0] + size, level)
        if starts:
            raise Ambiguous(starts, level)
    return None


def reindent(new_lines: list[str], block: list[str], found: list[str]) -> list[str]:
    """`new_lines` moved from the block's indentation to the indentation the file really has.

    The model wrote `block` (and `new_lines` relative to it) but the file holds `found`; the shift
    between their first non-blank lines is applied to every non-blank replacement line.
    """
    pairs = [(b, f) for b, f in zip(block, found, strict=False) if b.strip() and f.strip()]
    if not pairs:
        return new_lines
    wrote, actual = (_indent(line) for line in pairs[0])
    if wrote == actual:
        return new_lines
    return [
        actual + line[len(wrote) :] if line.strip() and line.startswith(wrote) else line for line in new_lines
    ]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def nearest_window(lines: list[str], block: list[str]) -> tuple[int, int, float] | None:
    """The window of `lines` (start, stop, similarity 0..1) most like `block`, or None for an empty file."""
    if not lines or not block:
        return None
    size = min(len(block), len(lines))
    target = "\n".join(line.strip() for line in block)
    best = (0, size, -1.0)
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(target)
    for i in range(len(lines) - size + 1):
        matcher.set_seq1("\n".join(line.strip() for line in lines[i : i + size]))
        if matcher.real_quick_ratio() <= best[2] or matcher.quick_ratio() <= best[2]:
            continue
        ratio = matcher.ratio()
        if ratio > best[2]:
            best = (i, i + size, ratio)
    return best


def show_lines(lines: list[str], start: int, stop: int) -> str:
    """Lines [start, stop) numbered from 1, the way the feedback shows them to the model."""
    width = len(str(stop))
    return "\n".join(f"{n + 1:>{width}}| {lines[n]}" for n in range(start, stop))


def feedback_not_found(path: str, lines: list[str], block: list[str], what: str) -> str:
    """The message for a block that matched nowhere: what failed, the nearest lines, how to retry."""
    parts = [
        f"{what} in {path} did not match the file, not even ignoring whitespace and quote/dash style.",
    ]
    missing = [line for line in block if line.strip() and line.strip() not in {x.strip() for x in lines}]
    if missing:
        listed = "\n".join(f"  {line}" for line in missing[:8])
        parts.append(f"These lines of it are not in the file at all:\n{listed}")
    window = nearest_window(lines, block)
    if window is None:
        parts.append(f"{path} is empty.")
    else:
        start, stop, _ = window
        shown = show_lines(lines, start, stop)
        where = f"line {stop}" if stop - start == 1 else f"lines {start + 1}-{stop}"
        parts.append(f"The most similar lines in {path} are {where}:\n{shown}")
    parts.append("Copy the lines to replace exactly from the file (without the line numbers) and try again.")
    return "\n".join(parts)


def feedback_ambiguous(path: str, lines: list[str], block: list[str], starts: list[int], what: str) -> str:
    """The message for a block found at several places: where, and how to make it unique."""
    where = ", ".join(str(s + 1) for s in starts[:10])
    return (
        f"{what} in {path} is ambiguous: it matches {len(starts)} places (starting at lines {where}). "
        "Include more surrounding lines so that it matches exactly one place."
    )
