"""A line-based three-way merge: the changes `base` → `theirs`, made on top of `ours` as well.

Undo uses it to take a turn's change back out of a file the user has edited since: base is what the
turn wrote, ours is the file now, theirs is the file before the turn. Like git, it refuses (returns
None) where both sides changed the same lines or lines next to each other, rather than guess.
"""

from __future__ import annotations

from difflib import SequenceMatcher


def merge3(base: str, ours: str, theirs: str) -> str | None:
    """`ours` with the changes from `base` to `theirs` as well, or None where they overlap."""
    old, mine, other = (text.splitlines(keepends=True) for text in (base, ours, theirs))
    in_mine, in_other = _kept(old, mine), _kept(old, other)
    merged: list[str] = []
    b = m = o = 0
    while True:
        # The next line of base that both sides kept is a fixed point; between two fixed points, at
        # most one side may differ from base.
        k = next((i for i in range(b, len(old)) if i in in_mine and i in in_other), len(old))
        end_m, end_o = (in_mine[k], in_other[k]) if k < len(old) else (len(mine), len(other))
        chunk = _pick(old[b:k], mine[m:end_m], other[o:end_o])
        if chunk is None:
            return None
        merged += chunk
        if k == len(old):
            return "".join(merged)
        merged.append(old[k])
        b, m, o = k + 1, end_m + 1, end_o + 1


def _kept(base: list[str], side: list[str]) -> dict[int, int]:
    """Which line of `side` each unchanged line of `base` became (lines are matched in order)."""
    # autojunk off: with it, lines common in a long file (blank lines, "}") would never match.
    matcher = SequenceMatcher(None, base, side, autojunk=False)
    return {a + i: b + i for a, b, size in matcher.get_matching_blocks() for i in range(size)}


def _pick(base: list[str], mine: list[str], other: list[str]) -> list[str] | None:
    if mine == other or other == base:
        return mine
    if mine == base:
        return other
    return None
