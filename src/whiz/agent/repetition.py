"""A reply caught in a loop: the same line (or block of lines, or piece of a line) over and over
at its end.

A small model at temperature 0 sometimes falls into a cycle and repeats it until the output limit:
the 0.5B ended an edit with `>>>>>>> REPLACE` and wrote that line 1,900 tokens more (70 s on this
machine's CPUs). The agent stops such a reply as soon as it is seen (`reply.read_reply`) and keeps what
came before the loop, which often holds a whole edit.
"""

from __future__ import annotations

import zlib

SHORT_PERIOD = 4
"""Cycles up to this many lines are loops after `REPEATS` copies."""

REPEATS = 8
"""How many times a short cycle must follow itself: code rarely repeats a line eight times in a row."""

MAX_PERIOD = 24
"""The longest cycle looked for, in lines. The 0.5B wrote the same six `elif` branches (12 lines)
over and over to its output limit, three replies in a row (four minutes)."""

LOOP_LINES = 36
"""A longer cycle is a loop once its copies fill this many lines, three copies at the least: code
does not repeat a block of five lines or more word for word three times in a row."""


LINE_PERIODS = range(4, 41)
"""Pieces of a line looked for, in characters: shorter ones are rules (`=====`) and padding."""

LINE_LOOP_CHARS = 256
LINE_REPEATS = 32
"""A piece of a line is a loop once its copies fill `LINE_LOOP_CHARS` characters, and number
`LINE_REPEATS` at the least. The 0.5B wrote `'o|', ` on one line to its output limit (two
minutes), where no complete line ever repeated; a literal list of 40 zeros is still data."""


SENTENCE_PERIODS = range(LINE_PERIODS.stop, 401)
SENTENCE_REPEATS = 4
"""A longer piece of a line (a sentence) is a loop at four copies in a row: the 0.5B wrote one
sentence of prose about its fix, 120 characters, again and again on one line to its output limit,
three replies in a row (over two minutes). Code does not repeat 41 characters or more four
times over on one line."""


def copies(period: int) -> int:
    """How many copies of a cycle of `period` lines make a loop."""
    return REPEATS if period <= SHORT_PERIOD else max(3, -(-LOOP_LINES // period))


def looping(text: str, new: str) -> int | None:
    """`loop_start(text)`, checking only what `new`, just added to the end of `text`, can have
    changed: the complete lines once it ends one, the last line once that is long enough to hold
    a loop. (Streaming calls this for every piece; the lines' check splits the whole reply.)"""
    if "\n" in new and (cut := _lines_loop(text)) is not None:
        return cut
    if len(text) - text.rfind("\n") > LINE_LOOP_CHARS:
        return _line_loop(text)
    return None


def loop_start(text: str) -> int | None:
    """Where the loop at the end of `text` begins, after the cycle's first copy (the text up to
    there is the reply without its loop); None when neither its complete lines at the end, nor
    the line it ends with, cycle."""
    return _lines_loop(text) or _line_loop(text)


def _line_loop(text: str) -> int | None:
    """A piece of the last line (complete or still streaming) written again and again."""
    at = text.rfind("\n") + 1
    line = text[at:]
    for period in LINE_PERIODS:
        span = period * max(LINE_REPEATS, -(-LINE_LOOP_CHARS // period))
        if len(line) < span:
            break  # spans grow with the period
        tail = line[-span:]
        piece = tail[:period]
        if (piece + piece).find(piece, 1) < period:
            continue  # a shorter piece over and over: a rule (`=====`), found at its own period
        if piece.strip() and tail == piece * (span // period):
            return at + _began(line, span, period)
    period = _sentence_period(line)
    if period is not None:
        return at + _began(line, period * SENTENCE_REPEATS, period)
    return None


def _sentence_period(line: str) -> int | None:
    """The length of a sentence that `line` ends with four copies of (`SENTENCE_PERIODS`), if any.
    The end's last characters were written one period before too: the nearest place they were is
    the only period to try (a nearer one than the shortest sentence is a piece, not a sentence)."""
    probe = line[-LINE_PERIODS.stop + 1 :]
    found = line.rfind(probe, 0, len(line) - 1)
    period = len(line) - len(probe) - found
    if found < 0 or period not in SENTENCE_PERIODS or len(line) < period * SENTENCE_REPEATS:
        return None
    tail = line[-period * SENTENCE_REPEATS :]
    piece = tail[:period]
    return period if piece.strip() and tail == piece * SENTENCE_REPEATS else None


def _began(line: str, span: int, period: int) -> int:
    """Where, in `line`, the loop that fills its last `span` characters ends its first copy."""
    start = len(line) - span
    while start > 0 and line[start - 1] == line[start - 1 + period]:
        start -= 1  # the loop began before the characters looked at
    return start + period


def _lines_loop(text: str) -> int | None:
    lines = text.split("\n")[:-1]  # complete lines only: the last one may still be streaming
    for period in range(1, MAX_PERIOD + 1):
        span = period * copies(period)
        if len(lines) < span:
            continue  # a longer cycle may need fewer lines
        tail = lines[-span:]
        if not any(line.strip() for line in tail[:period]):
            continue  # blank lines repeating are not a loop worth stopping
        if all(tail[i] == tail[i + period] for i in range(span - period)):
            start = len(lines) - span
            while start > 0 and lines[start - 1] == lines[start - 1 + period]:
                start -= 1  # the loop began before the lines looked at
            return sum(len(line) + 1 for line in lines[: start + period])
    return None


RUN_ON_RATIO = 0.2
"""A text that compresses to under a fifth of its size repeats itself. Code compresses to about a
third (0.30 for a 36 KB module of this project, 0.35-0.6 for programs of a few hundred bytes);
a reply that wrote one special case after another (`elif n <= 13: return "X" + ...`, the numbers
changing) to its output limit compressed to 0.13."""
RUN_ON_MIN_CHARS = 1000


def runs_on(text: str) -> bool:
    """Whether a long text goes on by repeating itself with small changes: not a loop (the copies
    differ, so `looping` does not see it), but no more new content than one."""
    if len(text) < RUN_ON_MIN_CHARS:
        return False
    raw = text.encode()
    return len(zlib.compress(raw, 9)) < RUN_ON_RATIO * len(raw)
