"""`whiz bench edits`: how much faster a model rewrites a file when it is told what to expect.

Each task asks for the whole edited file (`POST /v1/chat/completions`, temperature 0) in up to
three modes: `plain` (no prediction, speculation off), `lookup` (whiz only: speculation on, the
server drafts from n-grams of the prompt, and with its draft model if it has one) and
`prediction` (OpenAI Predicted Outputs, the current file as the prediction). The `freeform` suite
asks for new writing instead, with an unrelated prediction: drafts that miss, whose cost must
stay small. At temperature 0 every mode must write exactly what plain mode wrote;
the bench counts where it did not, and checks each edit for correctness (see `edit_tasks.py`).
Decode speed and TTFT are the server's `whiz` timings where it sends them, client-side otherwise.
"""

from __future__ import annotations

import asyncio
import datetime
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from whiz.bench.edit_report import mode_summary, print_report
from whiz.bench.edit_run import Run
from whiz.bench.edit_tasks import (
    EditTask,
    default_editeval_path,
    freeform_tasks,
    load_editeval,
    rename_tasks,
)
from whiz.bench.report import rounded
from whiz.client import ClientError, ConnectError, HttpClient, api_base

SYSTEM = (
    "You are a precise code editor. Apply the instruction to the code and output the complete "
    "updated file in one ```python block, with no explanation."
)
MODES = ("plain", "lookup", "prediction")
SUITES = ("rename", "editeval", "freeform")
FREEFORM_MAX_TOKENS = 200
MAX_TOKENS_CAP = 2048
DEFAULT_CHARS_PER_TOKEN = 3.0

Progress = Callable[[str], None]


def user_prompt(task: EditTask) -> str:
    if task.suite == "freeform":
        return task.instruction
    return f"Instruction: {task.instruction}\n\nFile `{task.filename}`:\n```python\n{task.code}\n```"


def max_tokens(task: EditTask, chars_per_token: float) -> int:
    """Twice the file plus a little; the cap never cuts below what the unchanged file needs."""
    if task.suite == "freeform":
        return FREEFORM_MAX_TOKENS
    estimate = len(task.code) / chars_per_token
    return min(int(2 * estimate) + 64, max(MAX_TOKENS_CAP, int(estimate) + 256))


def request_body(task: EditTask, mode: str, model: str, whiz: bool, chars_per_token: float) -> dict[str, Any]:
    """The same prompt in every mode; only the prediction and whiz's speculation switch differ."""
    body: dict[str, Any] = {
        "model": model,
        "temperature": 0,
        "max_tokens": max_tokens(task, chars_per_token),
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_prompt(task)}],
    }
    if task.suite == "freeform":  # an ordinary assistant, not a code editor
        body["messages"] = body["messages"][1:]
    if mode == "prediction":
        body["prediction"] = {"type": "content", "content": task.code}
    if whiz:  # other servers may refuse a field they don't know
        body["whiz"] = {"speculation": mode != "plain"}
    return body


def first_difference(a: str, b: str) -> int | None:
    """The offset of the first character where `a` and `b` differ; None when equal."""
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


class EditsBench:
    """One run against one server: setup, then `run_task` per task, then `summary`."""

    def __init__(self, target: str, model: str | None, api_key: str | None, progress: Progress):
        self.target = target
        self.model = model or ""
        self.api_key = api_key
        self.progress = progress
        self.http = HttpClient(target, api_key)
        self.whiz = False
        self.chars_per_token = DEFAULT_CHARS_PER_TOKEN
        self.runs: dict[str, list[dict[str, Run]]] = {}
        self.notes: list[str] = []
        self.suite = "all"
        self.limit: int | None = None

    async def close(self) -> None:
        await self.http.close()

    @property
    def modes(self) -> tuple[str, ...]:
        return MODES if self.whiz else ("plain", "prediction")

    async def setup(self, sample: str) -> None:
        """Pick the model, tell whiz from other servers, and learn chars per token on code."""
        if not self.model:
            models = await self.http.models()
            if not models:
                raise ClientError(f"{self.http.base}/models lists no model; pass --model")
            self.model = models[0]
        self.whiz = await self.is_whiz()

        async def prompt_tokens(text: str) -> tuple[int | None, bool]:
            body = {"model": self.model, "max_tokens": 1, "temperature": 0}
            turn = await self.http.chat_turn({**body, "messages": [{"role": "user", "content": "x" + text}]})
            return turn.input_tokens, bool(turn.whiz)

        (small, _), (large, says_whiz) = await prompt_tokens(""), await prompt_tokens(sample)
        self.whiz = self.whiz or says_whiz
        if small is not None and large is not None and large > small:
            self.chars_per_token = len(sample) / (large - small)
        else:
            self.notes.append(f"no usage reported; max_tokens assume {DEFAULT_CHARS_PER_TOKEN} chars/token")
        if not self.whiz:
            self.notes.append("not a whiz server: plain and prediction modes only, timings client-side")

    async def is_whiz(self) -> bool:
        """whiz answers `GET /health` with its status, model and version."""
        root = api_base(self.target).removesuffix("/v1")
        try:
            async with httpx.AsyncClient(timeout=10) as client:
                answer = (await client.get(f"{root}/health")).json()
        except (httpx.HTTPError, ValueError):
            return False
        if not isinstance(answer, dict):
            return False
        return answer.get("status") == "ok" and {"model", "version"} <= answer.keys()

    async def run_task(self, task: EditTask, index: int) -> dict[str, Run]:
        """Every mode on one task. The order rotates from task to task, so that the prompt-cache
        hits of whichever mode runs second and third fall evenly on all modes."""
        modes = self.modes
        order = [modes[(index + k) % len(modes)] for k in range(len(modes))]
        runs: dict[str, Run] = {}
        for mode in order:
            body = request_body(task, mode, self.model, self.whiz, self.chars_per_token)
            try:
                run = Run.from_turn(task.task_id, mode, await self.http.chat_turn(body))
            except ConnectError:
                raise
            except ClientError as exc:
                runs[mode] = Run(task.task_id, mode, error=str(exc))
                continue
            run.correct = await asyncio.to_thread(task.is_correct, run.text)
            runs[mode] = run
        plain = runs["plain"]
        for mode, run in runs.items():
            if mode != "plain" and run.error is None and plain.error is None:
                run.first_diff_at = first_difference(plain.text, run.text)
                run.identical = run.first_diff_at is None
        self.runs.setdefault(task.suite, []).append({m: runs[m] for m in modes})
        return runs


def progress_line(task: EditTask, runs: dict[str, Run]) -> str:
    parts = []
    for mode, run in runs.items():
        if run.error:
            parts.append(f"{mode} ERROR {run.error}")
            continue
        speed = f"{run.tokens_per_s:.1f} tok/s" if run.tokens_per_s is not None else "? tok/s"
        same = {None: "", True: " same", False: f" DIFFERS@{run.first_diff_at}"}[run.identical]
        parts.append(f"{mode} {speed} {'ok' if run.correct else 'wrong'}{same}")
    return f"{task.suite} {task.task_id}: " + " | ".join(parts)


# -- the summary -----------------------------------------------------------------------------------


def summarize(bench: EditsBench) -> dict[str, Any]:
    """The JSON line: per suite and mode, the totals of plain-vs-speculative identity, notes."""
    suites = {
        suite: {mode: mode_summary(rows, mode) for mode in bench.modes} for suite, rows in bench.runs.items()
    }
    differ = [
        {"suite": suite, "task": run.task_id, "mode": run.mode, "at_char": run.first_diff_at}
        for suite, rows in bench.runs.items()
        for row in rows
        for run in row.values()
        if run.identical is False
    ]
    runs = [run for rows in bench.runs.values() for row in rows for run in row.values()]
    compared = sum(run.identical is not None for run in runs)
    return rounded(
        {
            "bench": "edits",
            "target": bench.target,
            "model": bench.model,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "suite": bench.suite,
            "limit": bench.limit,
            "whiz": bench.whiz,
            "modes": list(bench.modes),
            "decode_source": "server" if bench.whiz else "client (streamed)",
            "python": platform.python_version(),
            "chars_per_token": bench.chars_per_token,
            "suites": suites,
            "identical": {"total": compared, "differ": len(differ), "differences": differ},
            "notes": bench.notes,
        }
    )


# -- running it ------------------------------------------------------------------------------------


def load_tasks(suite: str, limit: int | None, data: str | None, notes: list[str]) -> list[EditTask]:
    """The tasks of the chosen suites, the first `limit` of each."""
    chosen = SUITES if suite == "all" else (suite,)
    if any(s not in SUITES for s in chosen):
        raise ValueError(f"unknown suite {suite!r}; choose rename, editeval, freeform or all")
    tasks: list[EditTask] = []
    if "rename" in chosen:
        tasks += rename_tasks()[:limit]
    if "editeval" in chosen:
        path = Path(data) if data else default_editeval_path()
        if path is None or not path.is_file():
            missing = f"no EditEval data at {path}" if path else "no EditEval data found; pass --data"
            if suite == "editeval":
                raise FileNotFoundError(missing)
            notes.append(f"editeval skipped: {missing}")
        else:
            tasks += load_editeval(path)[:limit]
    if "freeform" in chosen:
        tasks += freeform_tasks()[:limit]
    return tasks


def main(
    target: str,
    suite: str = "all",
    limit: int | None = None,
    model: str | None = None,
    api_key: str | None = None,
    data: str | None = None,
) -> int:
    """`whiz bench edits`: the tables and the JSON line; 0 on success, 1 if the server failed us,
    2 for a bad suite or missing data."""

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    async def run() -> dict[str, Any]:
        """Every task in every mode; the summary the JSON line holds."""
        notes: list[str] = []
        tasks = load_tasks(suite, limit, data, notes)
        if not tasks:
            raise ValueError("no tasks to run")
        bench = EditsBench(target, model, api_key, say)
        bench.notes += notes
        bench.suite, bench.limit = suite, limit
        try:
            await bench.setup(tasks[0].code)
            for i, task in enumerate(tasks):
                runs = await bench.run_task(task, i)
                say(f"[{i + 1}/{len(tasks)}] {progress_line(task, runs)}")
            return summarize(bench)
        finally:
            await bench.close()

    try:
        summary = asyncio.run(run())
    except (ValueError, FileNotFoundError) as exc:
        print(f"whiz bench edits: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        print(f"whiz bench edits: {exc}", file=sys.stderr)
        return 1
    print_report(summary)
    return 0
