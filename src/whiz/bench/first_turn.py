"""The first turn's wait, for `whiz bench serve`: a long prefix cold, from memory and from disk after
a restart; and `whiz exec`'s first token from a fresh process, with and without the background server.

The prefix rows are `whiz bench prefix-cache`'s (engines in this process, the model the target
serves). The exec rows run `whiz exec --json` as a user would, each a new process, in a scratch
workspace and a scratch `WHIZ_HOME` (so no server or cache of the user's helps, and none is left
behind): first `--in-process` (the model loads in the command), then three commands sharing the
background server (the first starts it), each timed from its start to its first event from the
model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from whiz.bench.report import Row

if TYPE_CHECKING:
    from whiz.bench.measures import ServeBench

PREFIX_TOKENS = 6000
QUICK_PREFIX_TOKENS = 1500
"""Longer than the prefix cache's shortest entry (1,024), so the disk rows restore something."""
EXEC_TIMEOUT_S = 900.0

CALC = '''"""A tiny calculator."""


def add(a: float, b: float) -> float:
    return a + b


def mean(values: list[float]) -> float:
    if not values:
        raise ValueError("mean of nothing")
    return sum(values) / len(values)
'''

ASK = "In one sentence, what does calc.py do?"
EXEC_RUNS = (
    ("in_process", ["--in-process"], ASK),
    ("background_cold", [], ASK),
    ("background_warm", [], "Which function in calc.py can raise, and why? One sentence."),
    ("background_same_task", [], ASK),
)
"""A fresh `WHIZ_HOME` each bench: the in-process run prefills cold (and saves its prompt to the
prefix cache); the background server then starts from disk. The warm run asks something new (its
words are prefilled), the last repeats the first task (its whole prompt is cached)."""
EXEC_LABELS = {
    "in_process": ("exec first token, in-process", "the model loads in the command"),
    "background_cold": ("exec first token, new server", "it starts the background server"),
    "background_warm": ("exec first token, warm server", "the next command, a new task"),
    "background_same_task": ("exec first token, same task", "the first task again, warm"),
}
MODEL_EVENTS = ("item.started", "item.updated", "item.completed")


@dataclass(frozen=True)
class FirstTurnPlan:
    """What `whiz bench serve` measures of the first turn, beyond the target server."""

    prefix_tokens: int = PREFIX_TOKENS
    """Length of the prefix timed cold, from memory and from disk; 0 skips those rows."""
    exec_: bool = True
    """Time `whiz exec` from a fresh process, with and without the background server."""

    @classmethod
    def make(cls, quick: bool, prefix_tokens: int | None = None, exec_: bool = True) -> FirstTurnPlan:
        if prefix_tokens is None:
            prefix_tokens = QUICK_PREFIX_TOKENS if quick else PREFIX_TOKENS
        return cls(prefix_tokens, exec_)


# -- a long prefix: cold, memory, disk ---------------------------------------------------------------


async def measure_prefix(model: str, tokens: int, progress) -> tuple[dict[str, Any], list[Row]]:
    """The prefix-cache bench's four TTFTs over `tokens`, as the `prefix` field and table rows."""
    from whiz.bench.prefix_cache import run_prefix_cache_bench, summarize

    with tempfile.TemporaryDirectory(prefix="whiz-bench-kv-") as tmp:
        result = await run_prefix_cache_bench(model, tokens, Path(tmp), progress)
    summary = summarize(result)
    fields = ("saved_mb", "engine_load_s", "identical", "cold_over_disk", "disk_over_memory")
    prefix = {"tokens": tokens, **{k: summary[k] for k in fields}}
    labels = {
        "cold": "never seen",
        "memory": "from memory",
        "disk": "disk, restarted",
        "disk_uncached": "disk, not in page cache",
    }
    rows = []
    for name, row in result["rows"].items():
        prefix[f"{name}_ttft_ms"] = row["ttft_ms"]
        prefix[f"{name}_cached_tokens"] = row["cached_tokens"]
        same = {True: "same tokens as before", False: "DIFFERENT tokens"}.get(row.get("identical"))
        rows.append(
            Row(
                f"TTFT {_k(tokens)} prefix, {labels[name]}",
                "in-process",
                row["ttft_ms"],
                source="engine",
                tokens=f"{row['cached_tokens'] + row['prefill_tokens']} ({row['cached_tokens']})",
                note=same or "",
            )
        )
    return prefix, rows


def _k(tokens: int) -> str:
    return f"{tokens / 1000:g}k" if tokens >= 1000 else str(tokens)


# -- whiz exec from a fresh process --------------------------------------------------------------------


def local_model(model: str) -> str:
    """The model the target serves, as this machine can load it: "fake", or its file (never pulled:
    a bench does not download). Raises `WhizError` when it is not here."""
    if model == "fake" or (model.endswith(".gguf") and Path(model).is_file()):
        return model
    from whiz.models import ModelStore, default_home

    return str(ModelStore(default_home()).resolve(model, pull=False))


def note_model_hash(model: str, home: Path) -> None:
    """Hash the model file into the scratch home's prefix cache, as a user's home has it already
    (it is hashed once per file, not on every start)."""
    if model != "fake":
        from whiz.engine.kv_identity import model_sha256

        (home / "kv").mkdir(parents=True, exist_ok=True)
        model_sha256(Path(model), home / "kv" / "model-hashes.json")


def time_exec(args: list[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run `whiz exec --json ...`: ms from start to its first event from the model, and to its exit."""
    command = [sys.executable, "-m", "whiz", "exec", "--json", *args]
    first_ms, cached = None, None
    with tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        with subprocess.Popen(
            command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=err, text=True
        ) as process:
            deadline = threading.Timer(EXEC_TIMEOUT_S, process.kill)
            deadline.start()
            try:
                assert process.stdout is not None
                for line in process.stdout:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    kind = event.get("type")
                    if (
                        first_ms is None
                        and kind in MODEL_EVENTS
                        and event["item"].get("type") != "user_message"
                    ):
                        first_ms = (time.perf_counter() - start) * 1000
                    if kind == "turn.completed":
                        cached = (event.get("usage") or {}).get("cached_input_tokens")
            finally:
                deadline.cancel()
        done_ms = (time.perf_counter() - start) * 1000
        err.seek(0)
        tail = err.read().strip().splitlines()[-1:] or [""]
    return {
        "first_token_ms": first_ms,
        "done_ms": done_ms,
        "exit": process.returncode,
        "cached_tokens": cached,
        "stderr": tail[0],
    }


def measure_exec(model: str, progress) -> tuple[dict[str, Any], list[Row], list[str]]:
    """Each run of `EXEC_RUNS` with `model` ("fake" or a file): its timings by name, the table rows,
    and notes on failures."""
    from whiz.server.background import BackgroundServers

    runs: dict[str, Any] = {}
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="whiz-bench-exec-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        work.mkdir()
        (work / "calc.py").write_text(CALC)
        env = {**os.environ, "WHIZ_HOME": str(home), "WHIZ_BASE_URL": f"http://127.0.0.1:{_free_port()}"}
        for name in ("WHIZ_IN_PROCESS", "WHIZ_API_KEY"):
            env.pop(name, None)
        try:
            note_model_hash(model, home)
            for name, flags, task in EXEC_RUNS:
                progress(f"whiz exec from a fresh process: {name.replace('_', ' ')}")
                runs[name] = run = time_exec([*flags, "--model", model, task], work, env)
                if run["exit"] != 0:
                    notes.append(f"exec {name} exited {run['exit']}: {run['stderr']}")
        finally:
            BackgroundServers(home).stop()
    for name, run in runs.items():
        what, why = EXEC_LABELS[name]
        done = f"done in {run['done_ms'] / 1000:.1f} s" if run["exit"] == 0 else f"exit {run['exit']}"
        cached = "" if run["cached_tokens"] is None else f"({run['cached_tokens']})"
        rows.append(
            Row(what, "process", run["first_token_ms"], source="client", tokens=cached, note=f"{why}; {done}")
        )
    return runs, rows, notes


def _free_port() -> int:
    """A loopback port nothing listens on, so `whiz exec` finds no server there."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- into the serve bench ----------------------------------------------------------------------------


async def add_first_turn(bench: ServeBench, plan: FirstTurnPlan) -> None:
    """The prefix and exec rows, for the model the target serves, into `bench`'s table and summary."""
    import asyncio

    from whiz.errors import WhizError

    if not plan.prefix_tokens and not plan.exec_:
        return
    try:
        model = local_model(bench.model)
    except WhizError as exc:
        bench.notes.append(f"first-turn rows skipped: {bench.model} cannot be loaded here ({exc.message})")
        return
    if plan.prefix_tokens:
        bench.progress(f"a {plan.prefix_tokens}-token prefix: cold, from memory, from disk after a restart")
        try:
            bench.summary["prefix"], rows = await measure_prefix(model, plan.prefix_tokens, bench.progress)
            bench.rows += rows
        except WhizError as exc:
            bench.notes.append(f"prefix rows failed: {exc.message}")
    if plan.exec_:
        runs, rows, notes = await asyncio.to_thread(measure_exec, model, bench.progress)
        bench.rows += rows
        bench.notes += notes
        bench.summary["exec_first_token_ms"] = {name: run["first_token_ms"] for name, run in runs.items()}
        bench.summary["exec_done_ms"] = {name: run["done_ms"] for name, run in runs.items()}
