"""What the serve bench found, as rows for people (a rich table) and one JSON object for scripts."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from whiz.client import ClientError
from whiz.modes.endpoints import SetupError


@dataclass
class Row:
    """One line of the table. `value` is None when the measurement was skipped (see `note`)."""

    what: str
    transport: str
    value: float | None
    unit: str = "ms"
    source: str = ""
    tokens: str = ""
    note: str = ""


def print_report(rows: list[Row], summary: dict[str, Any], console: Console | None = None) -> None:
    """The table, then the summary as the last line of stdout (plain JSON, no markup)."""
    # Off a terminal rich assumes 80 columns, which folds every row; logs and CI are wide.
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title=f"whiz bench serve — {summary.get('target')} — model {summary.get('model')}")
    for name, justify in [
        ("measurement", "left"),
        ("transport", "left"),
        ("value", "right"),
        ("source", "left"),
        ("input tokens (cached)", "right"),
        ("note", "left"),
    ]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        value = "skipped" if row.value is None else f"{row.value:,.1f} {row.unit}"
        table.add_row(row.what, row.transport, value, row.source, row.tokens, row.note)
    console.print(table)
    for note in summary.get("notes", []):
        console.print(f"note: {note}", highlight=False)
    print(json.dumps(summary), flush=True)


def rounded(value: Any) -> Any:
    """Floats to 3 decimals, all the way down: microseconds of noise help no script."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def say(line: str) -> None:
    """A progress line on stderr: stdout holds a bench's tables and its one JSON line."""
    print(line, file=sys.stderr, flush=True)


def listed(value: str) -> list[str]:
    """A comma-separated option (`--variants fast,heal`) as its items."""
    return [v.strip() for v in value.split(",") if v.strip()]


def run_reported(bench: str, work: Coroutine[Any, Any, dict], show: Callable[[dict], None]) -> int:
    """Run a bench to its report and show it: 0; 2 when it could not start (no server, no model),
    1 when a server failed midway. Either failure is one line in `whiz bench <bench>`'s words."""
    try:
        report = asyncio.run(work)
    except SetupError as exc:
        say(f"whiz bench {bench}: {exc.message}")
        return 2
    except ClientError as exc:
        say(f"whiz bench {bench}: {exc}")
        return 1
    show(report)
    return 0
