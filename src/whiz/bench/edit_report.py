"""What `whiz bench edits` found: a summary per suite and mode, and the tables for people."""

from __future__ import annotations

import json
import statistics
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from whiz.bench.edit_run import Run


def median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def mode_summary(rows: list[dict[str, Run]], mode: str) -> dict[str, Any]:
    """Medians over the tasks that answered; speed-ups against plain mode on the same tasks."""
    done = [r for r in rows if r[mode].error is None]
    runs = [r[mode] for r in done]
    accepted, rejected = sum(r.accepted for r in runs), sum(r.rejected for r in runs)
    speed = median([r.tokens_per_s for r in runs])
    plain_speed = median([r["plain"].tokens_per_s for r in done if r["plain"].error is None])
    plain_total = median([r["plain"].total_s for r in done if r["plain"].error is None])
    per_task = [
        ratio(r[mode].tokens_per_s, r["plain"].tokens_per_s) for r in done if r["plain"].error is None
    ]
    compared = [r.identical for r in runs if r.identical is not None]
    return {
        "tasks": len(runs),
        "errors": len(rows) - len(runs),
        "decode_tokens_per_s": speed,
        "ttft_ms": median([r.ttft_ms for r in runs]),
        "total_s": median([r.total_s for r in runs]),
        "completion_tokens": median([r.completion_tokens for r in runs]),
        "accepted_tokens": accepted,
        "rejected_tokens": rejected,
        "acceptance_rate": accepted / (accepted + rejected) if accepted + rejected else None,
        "speedup": ratio(speed, plain_speed),
        "speedup_per_task": median(per_task),
        "total_speedup": ratio(plain_total, median([r.total_s for r in runs])),
        "identical": sum(compared) if mode != "plain" else None,
        "compared": len(compared) if mode != "plain" else None,
        "correct": sum(r.correct for r in runs),
    }


def print_report(summary: dict[str, Any], console: Console | None = None) -> None:
    """A table per suite, the notes, then the summary as the last line of stdout."""
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    columns = [
        "mode", "tasks", "decode tok/s", "TTFT ms", "total s", "accepted",
        "speed-up (medians)", "speed-up (per task)", "total speed-up", "identical to plain", "correct",
    ]  # fmt: skip
    for suite, modes in summary["suites"].items():
        table = Table(title=f"whiz bench edits — {suite} — {summary['target']} — model {summary['model']}")
        for i, name in enumerate(columns):
            table.add_column(name, justify="left" if i == 0 else "right")
        for mode, s in modes.items():
            identical = "—" if s["compared"] is None else f"{s['identical']}/{s['compared']}"
            table.add_row(
                mode,
                str(s["tasks"]) + (f" ({s['errors']} failed)" if s["errors"] else ""),
                fmt(s["decode_tokens_per_s"], ".1f"),
                fmt(s["ttft_ms"], ",.0f"),
                fmt(s["total_s"], ".2f"),
                fmt(s["acceptance_rate"], ".0%"),
                fmt(s["speedup"], ".2f", "×"),
                fmt(s["speedup_per_task"], ".2f", "×"),
                fmt(s["total_speedup"], ".2f", "×"),
                identical,
                f"{s['correct']}/{s['tasks']}",
            )
        console.print(table)
    notes = [
        f"decode speed and TTFT: {summary['decode_source']}; 'accepted' = accepted / (accepted + rejected) "
        "draft tokens over all tasks; modes run in rotating order per task",
        *summary["notes"],
    ]
    for note in notes:
        console.print(f"note: {note}", highlight=False)
    print(json.dumps(summary), flush=True)


def fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{unit}"
