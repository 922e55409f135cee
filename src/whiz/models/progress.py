"""Progress reporting for long downloads: a plain callback, and a rich bar that implements it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

# Called with (bytes done, bytes total); total is None when the source does not say.
ProgressFn = Callable[[int, int | None], None]


def no_progress(done: int, total: int | None) -> None:
    """A progress callback that shows nothing."""


@contextmanager
def rich_progress(description: str, console: Console | None = None) -> Iterator[ProgressFn]:
    """A progress bar on stderr, as a `ProgressFn`, for the duration of the block."""
    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console or Console(stderr=True), transient=False) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        yield update
