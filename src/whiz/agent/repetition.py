"""A reply caught in a loop: the same line (or few lines) over and over at its end.

A small model at temperature 0 sometimes falls into a cycle and repeats it until the output limit:
the 0.5B ended an edit with `>>>>>>> REPLACE` and wrote that line 1,900 tokens more (70 s on this
machine's CPUs). The agent stops such a reply as soon as it is seen (`Agent._ask`) and keeps what
came before the loop, which often holds a whole edit.
"""

from __future__ import annotations

MAX_PERIOD = 4
"""The longest cycle looked for, in lines."""

REPEATS = 8
"""How many times a cycle must follow itself: code rarely repeats a line eight times in a row."""


def loop_start(text: str) -> int | None:
    """Where the loop at the end of `text` begins, after the cycle's first copy (the text up to
    there is the reply without its loop); None when the complete lines at its end do not cycle."""
    lines = text.split("\n")[:-1]  # complete lines only: the last one may still be streaming
    for period in range(1, MAX_PERIOD + 1):
        span = period * REPEATS
        if len(lines) < span:
            break
        tail = lines[-span:]
        if not any(line.strip() for line in tail[:period]):
            continue  # blank lines repeating are not a loop worth stopping
        if all(tail[i] == tail[i + period] for i in range(span - period)):
            start = len(lines) - span
            while start > 0 and lines[start - 1] == lines[start - 1 + period]:
                start -= 1  # the loop began before the lines looked at
            return sum(len(line) + 1 for line in lines[: start + period])
    return None
