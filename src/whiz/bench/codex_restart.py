"""`whiz bench codex-restart`: the Codex CLI's first turn after a server restart, over a prompt it sent
before (target: under 2 s to the first token).

It starts `whiz serve` over a fresh prefix-cache folder, runs one `codex exec` turn (the real CLI,
configured as docs/clients.md says, over the Responses WebSocket), stops the server, starts it again
over the same folder and runs the same turn, then once more on the warm server. For each run it
reads the server's figures for the first response of the turn (TTFT, prompt and cached tokens,
from `/metrics`, polled while Codex runs) and, from Codex's own trace log, when Codex saw the
first output, counted from the command's start.

The turn's TTFT is the server's: from the turn's arrival, after Codex's warm-up (`generate: false`,
its instructions and tools) was prefilled, or restored; "first output" is what a user waits.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from whiz.bench.report import rounded, say

CODEX_VERSION = "0.169.0"
TASK = "Reply with one short sentence: what is hello.py?"
RUNS = (
    ("cold", "cold: a new server, nothing cached"),
    ("restarted", "after a restart: the prompt from disk"),
    ("warm", "the same server again: from memory"),
)
TARGET_MS = 2000.0
SERVER_START_S = 600.0
TURN_TIMEOUT_S = 1200.0
POLL_S = 0.05


@dataclass(frozen=True)
class CodexRestartPlan:
    """One run of the bench."""

    model: str = "qwen2.5-coder-0.5b"
    """What `whiz serve` loads (a registry name, a .gguf path, or 'fake')."""
    codex: Path | None = None
    """The Codex CLI; default: the one whiz's tests install from npm into the whiz cache, or `codex`."""
    prefix_cache_dir: Path | None = None
    """The server's prefix-cache folder; default: a fresh temporary one (so the first run is cold)."""
    serve_args: tuple[str, ...] = field(default_factory=tuple)
    """More `whiz serve` flags (`--ctx 65536` for the fake model, whose default window is small)."""


def find_codex(given: Path | None) -> Path:
    """The Codex CLI to run; `FileNotFoundError` saying how to install it when there is none."""
    if given is not None:
        return given
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "whiz"
    prefix = cache / f"openai-codex-{CODEX_VERSION}"
    installed = prefix / "node_modules" / ".bin" / "codex"
    if installed.exists():
        return installed
    if found := shutil.which("codex"):
        return Path(found)
    raise FileNotFoundError(
        f"no Codex CLI; install it with `npm install --prefix {prefix} @openai/codex@{CODEX_VERSION}` "
        "or pass --codex PATH"
    )


# -- the server ---------------------------------------------------------------------------------------


class Server:
    """`whiz serve` as a child process on a free loopback port, logging to a file."""

    def __init__(self, plan: CodexRestartPlan, kv_dir: Path, log: Path):
        self.plan = plan
        self.kv_dir = kv_dir
        self.log = log
        self.port = _free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> float:
        """Start it and wait until it answers; returns the seconds that took (the model's load)."""
        command = [
            sys.executable,
            "-m",
            "whiz",
            "serve",
            "--model",
            self.plan.model,
            "--port",
            str(self.port),
        ]
        command += ["--prefix-cache-dir", str(self.kv_dir), *self.plan.serve_args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for name in ("WHIZ_API_KEY", "WHIZ_API_KEYS"):
            env.pop(name, None)
        start = time.perf_counter()
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        while not self._healthy():
            if self.process.poll() is not None or time.perf_counter() - start > SERVER_START_S:
                self.stop()
                tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])
                raise RuntimeError(f"whiz serve did not start (log {self.log}):\n{tail}")
            time.sleep(0.2)
        return time.perf_counter() - start

    def _healthy(self) -> bool:
        try:
            return httpx.get(self.root + "/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def metrics(self) -> dict[str, float]:
        """The server's counters (unlabelled ones, and requests by API)."""
        text = httpx.get(self.root + "/metrics", timeout=10.0).text
        return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(\S+) (\S+)$", text, re.M)}

    def stop(self) -> None:
        """SIGTERM, as a user's Ctrl-C: the server finishes writing its prefix cache, then exits."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


# -- one codex turn ---------------------------------------------------------------------------------


def configure_codex(home: Path, root: str, *, websocket: bool = True) -> None:
    """The Codex CLI config of docs/clients.md, pointed at the whiz server at `root`, with its model
    catalog; `websocket=False` keeps Codex on HTTP.

    Codex's own workspace-write sandbox cannot write on some machines (a container, as root); the
    turn only reads, in a scratch folder, so it runs unsandboxed."""
    home.mkdir(parents=True, exist_ok=True)
    catalog = home / "whiz-models.json"
    catalog.write_text(httpx.get(f"{root}/whiz/codex/models.json", timeout=10.0).text)
    (home / "config.toml").write_text(
        f"""model = "whiz"
model_provider = "whiz"
model_catalog_json = "{catalog}"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.whiz]
name = "whiz"
base_url = "{root}/v1"
wire_api = "responses"
supports_websockets = {"true" if websocket else "false"}
stream_max_retries = 0
"""
    )


class FirstResponse:
    """Polls the server's counters while a turn runs, to catch its first response's TTFT and tokens."""

    def __init__(self, server: Server):
        self.server = server
        self.before = server.metrics()
        self.first: dict[str, float] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set() and self.first is None:
            self._poll_once()
            self._stop.wait(POLL_S)

    def _poll_once(self) -> None:
        with contextlib.suppress(httpx.HTTPError):
            now = self.server.metrics()
            if now.get("whiz_responses_total", 0) > self.before.get("whiz_responses_total", 0):
                self.first = {k: now.get(k, 0) - self.before.get(k, 0) for k in now}

    def finish(self) -> dict[str, float] | None:
        """The counters' change at the turn's first response (None if there was none)."""
        self._stop.set()
        self._thread.join(timeout=10)
        if self.first is None:  # it finished between the last poll and Codex's exit
            self._poll_once()
        return self.first


def codex_turn(codex: Path, home: Path, work: Path, server: Server) -> dict[str, Any]:
    """Run `codex exec TASK` once: the server's figures for its first response, and Codex's view."""
    env = {**os.environ, "CODEX_HOME": str(home), "RUST_LOG": "codex_api=trace"}
    watch = FirstResponse(server)
    started = time.time()
    done = subprocess.run(
        [str(codex), "exec", "--skip-git-repo-check", TASK],
        cwd=work, env=env, capture_output=True, text=True, timeout=TURN_TIMEOUT_S, check=False,
    )  # fmt: skip
    wall_ms = (time.time() - started) * 1000
    first = watch.finish() or {}
    responses = first.get("whiz_responses_total", 0)
    seen_ms = first_output_ms(done.stderr, started)
    return {
        "exit": done.returncode,
        "ttft_ms": first.get("whiz_ttft_ms_sum") if responses == 1 else None,
        "prompt_tokens": first.get("whiz_prompt_tokens_total"),
        "cached_tokens": first.get("whiz_cached_tokens_total"),
        "restored_tokens": first.get("whiz_prefix_cache_restored_tokens"),
        "first_output_ms": seen_ms,
        "wall_ms": wall_ms,
        "reply": done.stdout.strip().splitlines()[-1:] or [""],
        "error": "" if done.returncode == 0 else (done.stderr.strip().splitlines() or [""])[-1],
    }


_EVENT = re.compile(r"^(\S+Z) .*responses event: (response\.[a-z_.]+)", re.M)
_NOT_OUTPUT = {"response.created", "response.in_progress"}


def first_output_ms(log: str, started: float) -> float | None:
    """When Codex logged the first event of model output, in ms from the command's start (its trace
    log names the events it does not handle itself, the first part or item of a reply among them)."""
    for stamp, event in _EVENT.findall(log):
        if event not in _NOT_OUTPUT:
            at = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            return (at - started) * 1000
    return None


# -- the bench ----------------------------------------------------------------------------------------


def run_codex_restart(plan: CodexRestartPlan) -> dict[str, Any]:
    """The three runs, and what the prefix cache held after the first."""
    codex = find_codex(plan.codex)
    result: dict[str, Any] = {"runs": {}, "load_s": []}
    with tempfile.TemporaryDirectory(prefix="whiz-bench-codex-") as tmp:
        scratch = Path(tmp)
        kv_dir = plan.prefix_cache_dir or scratch / "kv"
        work = scratch / "work"
        work.mkdir()
        (work / "hello.py").write_text('print("hi")\n')
        server = Server(plan, kv_dir, scratch / "serve.log")
        home = scratch / "codex-home"
        try:
            for name, what in RUNS:
                if name == "restarted":
                    server.stop()
                    files = list(kv_dir.glob("*.kv"))
                    result["kv_entries"] = len(files)
                    result["kv_mb"] = sum(f.stat().st_size for f in files) / 2**20
                if server.process is None:
                    say(f"… starting whiz serve --model {plan.model}")
                    result["load_s"].append(server.start())
                    configure_codex(home, server.root)  # the new server's port
                say(f"… codex exec, {what}")
                result["runs"][name] = codex_turn(codex, home, work, server)
        finally:
            server.stop()
    return result


def summarize(plan: CodexRestartPlan, result: dict[str, Any]) -> dict[str, Any]:
    runs = result["runs"]

    def field_of(name: str, key: str) -> Any:
        return (runs.get(name) or {}).get(key)

    restarted = field_of("restarted", "ttft_ms")
    return rounded(
        {
            "bench": "codex-restart",
            "model": plan.model,
            "codex": CODEX_VERSION,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            **{f"{name}_ttft_ms": field_of(name, "ttft_ms") for name, _ in RUNS},
            **{f"{name}_first_output_ms": field_of(name, "first_output_ms") for name, _ in RUNS},
            **{f"{name}_cached_tokens": field_of(name, "cached_tokens") for name, _ in RUNS},
            "prompt_tokens": field_of("cold", "prompt_tokens"),
            "kv_entries": result.get("kv_entries"),
            "kv_mb": result.get("kv_mb"),
            "server_load_s": result["load_s"],
            "restarted_under_target": restarted is not None and restarted < TARGET_MS,
            "errors": {name: run["error"] for name, run in runs.items() if run["exit"] != 0},
        }
    )


def main(plan: CodexRestartPlan) -> int:
    """Print the table and the JSON line; 0 when every turn ran, 1 when one failed, 2 when it could
    not start."""
    from rich.console import Console
    from rich.table import Table

    try:
        result = run_codex_restart(plan)
    except (FileNotFoundError, RuntimeError) as exc:
        say(f"whiz bench codex-restart: {exc}")
        return 2
    table = Table(title=f"Codex CLI {CODEX_VERSION}: one turn, then a server restart — model {plan.model}")
    for column in ("run", "server TTFT", "prompt (cached)", "first output seen by Codex", "turn done"):
        table.add_column(column)
    for name, what in RUNS:
        run = result["runs"].get(name)
        if run is None:
            continue
        ttft = "-" if run["ttft_ms"] is None else f"{run['ttft_ms'] / 1000:.2f} s"
        seen = "-" if run["first_output_ms"] is None else f"{run['first_output_ms'] / 1000:.2f} s"
        tokens = f"{run['prompt_tokens']:.0f} ({run['cached_tokens']:.0f})" if run["prompt_tokens"] else "-"
        table.add_row(what, ttft, tokens, seen, f"{run['wall_ms'] / 1000:.1f} s")
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    summary = summarize(plan, result)
    print(json.dumps(summary), flush=True)
    return 1 if summary["errors"] else 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--codex", type=Path)
    parser.add_argument("--prefix-cache-dir", type=Path)
    parser.add_argument("--serve-args", default="", help="more `whiz serve` flags, e.g. '--ctx 65536'")
    args = parser.parse_args()
    serve_args = tuple(shlex.split(args.serve_args))
    sys.exit(main(CodexRestartPlan(args.model, args.codex, args.prefix_cache_dir, serve_args)))
