"""The CanItEdit suite of `whiz bench agent`: instructional code edits with hidden tests, from nuprl's
CanItEdit (105 hand-written Python programs, not derived from HumanEval), as a second dev suite
beside EditEval.

Its licences (the dataset card's MIT; the repository's BSD 3-clause with a machine-learning
restriction: not to be used as training data) allow evaluating on it, but this repository does
not carry the data: `scripts/canitedit.py`
downloads it from the Hugging Face dataset and writes `shared/bench/canitedit.jsonl` in EditEval's
format (task_id, instruction, input, test), which is read here. A task's test is CanItEdit's
hidden test code, run after the edited program; it passes when the program exits 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from whiz.bench.edit_tasks import EditTask

HOW_TO_GET = (
    "download and convert it with `python scripts/canitedit.py` (it needs huggingface.co; or pass "
    "--from a copy of the dataset's rows), or pass --canitedit FILE"
)


def default_canitedit_path() -> Path | None:
    """`shared/bench/canitedit.jsonl` in the repository or beside it (`../shared`), if there is one."""
    for parent in Path(__file__).resolve().parents:
        if (candidate := parent / "shared/bench/canitedit.jsonl").is_file():
            return candidate
    return None


def canitedit_tasks(
    data: Path | str | None, limit: int | None, say: Callable[[str], None], bench: str = "agent"
) -> list[EditTask] | None:
    """The first `limit` CanItEdit tasks from `data` (default: `default_canitedit_path`), or None after
    telling the user, in `whiz bench <bench>`'s words, that there is no data and how to get it."""
    path = data or default_canitedit_path()
    if path is None or not Path(path).is_file():
        where = path or "shared/bench/canitedit.jsonl"
        say(f"whiz bench {bench}: no CanItEdit data at {where}; {HOW_TO_GET}")
        return None
    try:
        return load_canitedit(path)[:limit]
    except (ValueError, KeyError, TypeError) as exc:
        say(f"whiz bench {bench}: {path} is not CanItEdit's converted JSONL ({exc}); {HOW_TO_GET}")
        return None


def load_canitedit(path: Path | str) -> list[EditTask]:
    """Read the converted JSONL: task_id, filename, instruction, input (the program before), test
    (code run after the program: it passes when the whole exits 0)."""
    tasks = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from None
        tasks.append(
            EditTask(
                suite="canitedit",
                task_id=row["task_id"],
                filename=row["filename"],
                instruction=row["instruction"].strip(),
                code=row["input"],
                test=row["test"],
            )
        )
    return tasks
