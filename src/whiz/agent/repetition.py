"""A reply caught in a loop: the same line (or block of lines) over and over at its end.

A small model at temperature 0 sometimes falls into a cycle and repeats it until the output limit:
the 0.5B ended an edit with `>>>>>>> REPLACE` and wrote that line 1,900 tokens more (70 s on this
machine's CPUs). The agent stops such a reply as soon as it is seen (`Agent._ask`) and keeps what
came before the loop, which often holds a whole edit.
"""

from __future__ import annotations

SHORT_PERIOD = 4
"""Cycles up to this many lines are loops after `REPEATS` copies."""

REPEATS = 8
"""How many times a short cycle must follow itself: code rarely repeats a line eight times in a row."""

MAX_PERIOD = 24
"""The longest cycle looked for, in lines. The 0.5B wrote the same six `elif` branches (12 lines)
over and over to its output limit, three replies in a row (EditEval 39, 240 s)."""

LOOP_LINES = 36
"""A longer cycle is a loop once its copies fill this many lines, three copies at the least: code
does not repeat a block of five lines or more word for word three times in a row."""


def copies(period: int) -> int:
    """How many copies of a cycle of `period` lines make a loop."""
    return REPEATS if period <= SHORT_PERIOD else max(3, -(-LOOP_LINES // period))


def loop_start(text: str) -> int | None:
    """Where the loop at the end of `text` begins, after the cycle's first copy (the text up to
    there is the reply without its loop); None when the complete lines at its end do not cycle."""
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
