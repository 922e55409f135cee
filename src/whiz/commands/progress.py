"""The swarm's live view in a terminal: one rich progress row per micro-task.

It is an `EventSink` like the JSON printer, fed the same items, so what the terminal shows and
what `--json` prints never disagree.
"""

from __future__ import annotations

from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from whiz.agent.events import Event

_STATUS = {
    "in_progress": "[yellow]working[/]",
    "passed": "[green]passed[/]",
    "failed": "[red]failed[/]",
}


class SwarmProgress:
    """Rows appear with the plan; each row shows its attempt, model and status, then its merge."""

    def __init__(self, err: TextIO | None = None, *, console: Console | None = None):
        self.console = console or Console(file=err, stderr=err is None)
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(bar_width=12),
            TextColumn("{task.fields[state]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self._rows: dict[str, Any] = {}
        self._overall = None
        self._started = False

    def __call__(self, event: Event) -> None:
        kind, item = event["type"], event.get("item") or {}
        match (kind, item.get("type")):
            case ("item.completed", "swarm_plan"):
                self._start(item["tasks"])
            case ("item.started" | "item.updated" | "item.completed", "micro_task"):
                self._task(item, done=kind == "item.completed")
            case ("item.completed", "merge"):
                self._merge(item)
            case ("turn.completed" | "turn.failed", _):
                self.close()

    def close(self) -> None:
        if self._started:
            self.progress.stop()
            self._started = False

    def _start(self, tasks: list[dict]) -> None:
        self.progress.start()
        self._started = True
        self._overall = self.progress.add_task("[bold]swarm[/]", total=len(tasks), state="")
        for t in tasks:
            label = f"{t['id']}: {t['title'][:48]}"
            self._rows[t["id"]] = self.progress.add_task(label, total=1, state="[dim]waiting[/]")

    def _task(self, item: dict, *, done: bool) -> None:
        row = self._rows.get(item["task_id"])
        if row is None:
            return
        state = f"{_STATUS.get(item['status'], item['status'])} (attempt {item['attempt']}, {item['mode']})"
        self.progress.update(row, state=state, completed=1 if done else 0)
        if done and self._overall is not None:
            self.progress.advance(self._overall)

    def _merge(self, item: dict) -> None:
        row = self._rows.get(item["task_id"])
        if row is None:
            return
        if item["status"] == "conflict":
            self.progress.update(row, state="[red]conflict, not merged[/]")
            for c in item["conflicts"]:
                self.console.print(f"[red]conflict[/] {c['path']}: {c['reason']}", highlight=False)
        else:
            self.progress.update(row, state=f"[green]{item['status']}[/]")
