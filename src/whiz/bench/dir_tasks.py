"""Tasks for `whiz bench agent --tasks DIR`: a folder of tasks written by hand, outside the repository.

Each task is a folder `DIR/<id>/`:

    task.json (or task.toml)   {"task": what the agent is told, "judge": the judge's command,
                                "test_cmd": the tests a user would give with --test-cmd (optional)}
    files/                     the workspace the agent starts in
    judge/                     the judge's own files (optional): hidden from the agent

Commands may name `{python}`: the bench's own interpreter (it has pytest). The judge runs on a copy
of the final workspace with `judge/` copied over it, in the sandbox, and passes on exit 0. With
tests (`--with-tests`) the agent is given `test_cmd`; a task without one is given the judge's command,
its files copied into the workspace, as a user who has the tests would give them.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class TaskDirError(ValueError):
    """A task folder that cannot be read, with what is wrong with it."""


@dataclass(frozen=True)
class DirTask:
    task_id: str
    task: str
    judge: str
    files: Path
    judge_files: Path | None
    test_cmd: str | None = None


def load_tasks(root: Path) -> list[DirTask]:
    """Every task under `root`, sorted by id. TaskDirError names the first bad one and why."""
    if not root.is_dir():
        raise TaskDirError(f"{root}: not a folder of tasks")
    tasks = [load_task(d) for d in sorted(root.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    if not tasks:
        raise TaskDirError(f"{root}: no tasks (each is a folder with task.json or task.toml and files/)")
    return tasks


def load_task(folder: Path) -> DirTask:
    spec = read_spec(folder)
    for key in ("task", "judge"):
        if not isinstance(spec.get(key), str) or not spec[key].strip():
            raise TaskDirError(f"{folder}: {key!r} must be a non-empty string")
    test_cmd = spec.get("test_cmd")
    if test_cmd is not None and (not isinstance(test_cmd, str) or not test_cmd.strip()):
        raise TaskDirError(f"{folder}: 'test_cmd' must be a non-empty string when given")
    unknown = set(spec) - {"task", "judge", "test_cmd"}
    if unknown:
        raise TaskDirError(f"{folder}: unknown keys {sorted(unknown)} (task, judge, test_cmd)")
    if not (folder / "files").is_dir():
        raise TaskDirError(f"{folder}: no files/ folder (the workspace the agent starts in)")
    judge_files = folder / "judge"
    return DirTask(
        folder.name, spec["task"], spec["judge"], folder / "files",
        judge_files if judge_files.is_dir() else None, test_cmd,
    )  # fmt: skip


def read_spec(folder: Path) -> dict[str, Any]:
    as_json, as_toml = folder / "task.json", folder / "task.toml"
    try:
        if as_json.is_file():
            spec = json.loads(as_json.read_text())
        elif as_toml.is_file():
            spec = tomllib.loads(as_toml.read_text())
        else:
            raise TaskDirError(f"{folder}: no task.json or task.toml")
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TaskDirError(f"{folder}: cannot read its task file: {exc}") from None
    if not isinstance(spec, dict):
        raise TaskDirError(f"{folder}: the task file must hold an object")
    return spec


def command(text: str) -> str:
    return text.replace("{python}", sys.executable)


def copy_into(source: Path | None, dest: Path) -> None:
    if source is not None:
        shutil.copytree(source, dest, dirs_exist_ok=True, symlinks=True)


def judge_for(
    task: DirTask, run_ok: Callable[[Path, str], Awaitable[bool]]
) -> Callable[[Path], Awaitable[bool]]:
    """The judge: the task's command on a copy of the final workspace with its judge files over it
    (so that the agent's workspace is left as it was, and a judge file it changed is restored)."""

    async def judge(root: Path) -> bool:
        with tempfile.TemporaryDirectory(prefix="whiz-bench-judge-") as tmp:
            copy = Path(tmp) / "ws"
            shutil.copytree(root, copy, symlinks=True, ignore_dangling_symlinks=True)
            copy_into(task.judge_files, copy)
            return await run_ok(copy, command(task.judge))

    return judge


def setup_for(task: DirTask, with_tests: bool) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        copy_into(task.files, root)
        if with_tests and task.test_cmd is None:
            copy_into(task.judge_files, root)

    return setup


def tests_for(task: DirTask) -> str:
    """The test command the agent is given with --with-tests."""
    return command(task.test_cmd or task.judge)
