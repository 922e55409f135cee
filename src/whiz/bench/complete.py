"""`whiz bench complete`: completion as you type, replayed from real code.

Functions from well-known Python files (the standard library's, so every machine has the same
ones) are typed again from an empty body, a word or symbol at a time. At each pause the replay asks
the server for a completion at the cursor as llama.vim does (`/infill`: the lines before, the
cursor's line up to the cursor, the rest of the file as suffix, streamed) and waits for the answer
before typing on. Each file is cut to about `file_tokens` tokens around the function, and loaded
first (a request for no output, as an editor's plugin warms the server) before typing starts.

Per request: time to first token (the server's own prefill time, `timings.prompt_ms`), time to a
complete line (from sending the request to the first newline of the answer, or its end), tokens
prefilled (`timings.prompt_n`), and whether the completion's first line is the rest of the line the
replay goes on to type (counted where that rest has text). The same replay runs against
llama-server's `/infill` (started with `--cache-reuse 256` on the same model file) when one is given:
both servers run at once and each pause asks one, then the other, so a machine whose load changes
during the run slows both alike (the servers are idle while not asked).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from whiz.bench.llama_baseline import stock_env
from whiz.bench.report import rounded
from whiz.gateway.local import LocalServer, free_port

FUNCTIONS = (
    ("textwrap", "TextWrapper._split_chunks"),
    ("shlex", "join"),
    ("fnmatch", "filter"),
    ("colorsys", "rgb_to_hsv"),
    ("heapq", "nsmallest"),
    ("bisect", "insort_right"),
    ("json.encoder", "py_encode_basestring_ascii"),
    ("calendar", "Calendar.itermonthdays"),
)
"""(module, function): short functions of the standard library, typed again from an empty body."""
QUICK_FUNCTIONS = 2
QUICK_REQUESTS = 20
REQUESTS_PER_FUNCTION = 80
N_PREDICT = 48
_WORDS = re.compile(r"\n[ \t]*|[ \t]+|\w+|[^\w\s]")
Progress = Callable[[str], None]
MEASURES = (
    "requests",
    "first_token_ms_median",
    "line_ms_median",
    "line_ms_p95",
    "prefill_tokens_median",
    "acceptance",
)


@dataclass(frozen=True)
class Case:
    """One function to type: the file around it, and its body."""

    name: str
    before: str
    """The file up to the function's empty body (its signature and docstring included)."""
    body: str
    after: str


@dataclass
class CompletePlan:
    model: str = "qwen2.5-coder-0.5b"
    quick: bool = False
    llama_server: Path | None = None
    """A llama-server binary to compare with (skipped without one)."""
    model_path: Path | None = None
    """The GGUF llama-server loads (default: the whiz model store's file for `model`)."""
    file_tokens: int = 2000
    threads: int | None = None
    requests: int | None = None
    """Completions asked per function, at its first pauses (default: 80, or 20 with `quick`)."""
    log_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))


def cases(quick: bool, file_chars: int) -> list[Case]:
    """The functions, each in about `file_chars` characters of its file."""
    out = []
    for module_name, qualname in FUNCTIONS[:QUICK_FUNCTIONS] if quick else FUNCTIONS:
        source = Path(inspect.getsourcefile(importlib.import_module(module_name)) or "").read_text()
        node = _find(ast.parse(source), qualname.split("."))
        if node is None or not node.body:
            continue
        lines = source.splitlines(keepends=True)
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(node.body) > 1:
            first = node.body[1]  # keep the docstring: the user wrote it before the body
        start = sum(len(x) for x in lines[: first.lineno - 1])
        start += len(lines[first.lineno - 1]) - len(lines[first.lineno - 1].lstrip())
        end = sum(len(x) for x in lines[: node.end_lineno])
        before, body, after = source[:start], source[start:end].rstrip("\n"), source[end:]
        room = max(file_chars - len(body), 0)
        before = _tail_lines(before, room * 3 // 4)
        after = _head_lines(after, room - len(before))
        out.append(Case(f"{module_name}.{qualname}", before, body, after))
    return out


def _find(tree: ast.AST, path: list[str]) -> ast.FunctionDef | None:
    for node in getattr(tree, "body", []):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == path[0]:
            if len(path) == 1:
                return node if isinstance(node, ast.FunctionDef) else None
            return _find(node, path[1:])
    return None


def _tail_lines(text: str, chars: int) -> str:
    cut = text[-chars:] if chars < len(text) else text
    return cut[cut.find("\n") + 1 :] if len(cut) < len(text) else cut


def _head_lines(text: str, chars: int) -> str:
    cut = text[:chars]
    return cut[: cut.rfind("\n") + 1] if len(cut) < len(text) else cut


def pauses(case: Case, limit: int) -> Iterator[tuple[str, str, str]]:
    """(text before the cursor, text after it, the rest of the cursor's line still to type) at each
    pause of the typing: at the empty body, then after every word, run of spaces, symbol or new line.
    What is not typed yet is not in the file: the suffix is the file after the function."""
    ends = [0] + [m.end() for m in _WORDS.finditer(case.body)]
    after = "\n" + case.after if case.after else "\n"
    for typed in ends[:limit]:
        yield case.before + case.body[:typed], after, case.body[typed:].split("\n", 1)[0]


@dataclass
class Sample:
    first_token_ms: float
    line_ms: float
    prefill_tokens: int
    accepted: bool | None
    line: str = ""
    """The completion's first line."""
    expected: str = ""
    """The rest of the line the replay went on to type."""
    case: str = ""


def ask(
    http: httpx.Client, url: str, before: str, after: str, rest_of_line: str, *, n_predict: int = N_PREDICT
) -> Sample:
    """One completion, streamed from `/infill` as llama.vim asks for it."""
    line_start = before.rfind("\n") + 1
    cursor_line = before[line_start:]
    body = {
        "input_prefix": before[:line_start],
        "prompt": cursor_line,
        "input_suffix": after,
        "input_extra": [],
        "n_predict": n_predict,
        "n_indent": len(cursor_line) - len(cursor_line.lstrip()),
        "top_k": 40,
        "top_p": 0.99,
        "temperature": 0,
        "stream": True,
        "cache_prompt": True,
        "samplers": ["top_k", "top_p", "infill"],
        "timings_per_token": True,
    }
    t0 = time.perf_counter()
    line_ms: float | None = None
    content = ""
    final: dict[str, Any] = {}
    with http.stream("POST", url + "/infill", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            content += event.get("content", "")
            final = event if "timings" in event else final
            if line_ms is None and "\n" in content.lstrip("\n"):
                line_ms = (time.perf_counter() - t0) * 1000
            if event.get("stop") or (line_ms is not None and final):
                # Past the first line only its timings matter: a server that sends them with every
                # token (llama-server, asked for `timings_per_token`) is not kept writing the rest.
                break
    if line_ms is None:
        line_ms = (time.perf_counter() - t0) * 1000
    timings = final.get("timings", {})
    accepted = None
    if rest_of_line.strip():
        accepted = content.split("\n", 1)[0].rstrip() == rest_of_line.rstrip()
    return Sample(
        timings.get("prompt_ms", line_ms),
        line_ms,
        int(timings.get("prompt_n", 0)),
        accepted,
        content.split("\n", 1)[0],
        rest_of_line,
    )


REQUEST_TIMEOUT_S = 900
"""Opening a 2,000-token file is a full prefill: minutes on a loaded 2-core machine."""
START_TIMEOUT_S = 1200
"""Loading the model, on the same loaded machine."""


def replay(url: str, work: list[Case], limit: int, progress: Progress) -> list[Sample]:
    return replay_paired([url], work, limit, progress)[0]


def replay_paired(urls: list[str], work: list[Case], limit: int, progress: Progress) -> list[list[Sample]]:
    """The replay against each server, interleaved: each pause asks every server in turn."""
    samples: list[list[Sample]] = [[] for _ in urls]
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as http:
        for case in work:
            progress(f"typing {case.name}")
            for url in urls:
                # Opening the file: the editor warms the server up before the first keystroke.
                ask(http, url, *next(pauses(case, 1)), n_predict=0)
            for pause in pauses(case, limit):
                for mine, url in zip(samples, urls, strict=True):
                    mine.append(ask(http, url, *pause))
                    mine[-1].case = case.name
    return samples


def summary(samples: list[Sample]) -> dict[str, Any]:
    lines = sorted(s.line_ms for s in samples)
    judged = [s.accepted for s in samples if s.accepted is not None]
    return rounded(
        {
            "requests": len(samples),
            "first_token_ms_median": statistics.median(s.first_token_ms for s in samples),
            "line_ms_median": statistics.median(lines),
            "line_ms_p95": lines[min(len(lines) - 1, int(len(lines) * 0.95))],
            "prefill_tokens_median": statistics.median(s.prefill_tokens for s in samples),
            "acceptance": sum(judged) / len(judged) if judged else None,
        }
    )


def start_whiz(plan: CompletePlan) -> LocalServer:
    args = ["--model", plan.model, "--engine-only", "--slots", "2", "--ctx", "8192"]
    args += ["--threads", str(plan.threads)] if plan.threads else []
    server = LocalServer(args, plan.log_dir, name="whiz-bench-complete", start_timeout_s=START_TIMEOUT_S)
    server.wait_ready()
    return server


class LlamaServer:
    """llama-server on the same model file, with llama.vim's recommended `--cache-reuse 256`."""

    def __init__(self, plan: CompletePlan):
        from whiz.models import ModelStore, default_home

        model_path = plan.model_path or ModelStore(default_home()).resolve(plan.model, pull=False)
        port = free_port()
        command = [str(plan.llama_server), "-m", str(model_path), "--port", str(port), "-c", "8192"]
        command += ["-np", "2", "--cache-reuse", "256", "-ub", "1024", "-b", "1024"]
        command += ["-t", str(plan.threads)] if plan.threads else []
        self.log = plan.log_dir / f"llama-server-{port}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=stock_env())
        self.url = f"http://127.0.0.1:{port}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}; see {self.log}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama-server did not start; see {self.log}")
            time.sleep(0.25)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def run_all(plan: CompletePlan, work: list[Case], limit: int, progress: Progress) -> dict[str, Any]:
    """Each server's summary; llama-server's is None without a binary to run."""
    whiz = start_whiz(plan)
    peer = None
    try:
        urls = [whiz.url]
        if plan.llama_server is not None:
            peer = LlamaServer(plan)
            peer.wait_ready()
            urls.append(peer.url)
        samples = replay_paired(urls, work, limit, progress)
        results = [summary(s) for s in samples]
        log = plan.log_dir / "whiz-bench-complete-samples.jsonl"
        with open(log, "w") as out:
            for name, mine in zip(("whiz", "llama_server"), samples, strict=False):
                out.writelines(json.dumps({"server": name} | asdict(x)) + "\n" for x in mine)
        progress(f"each request: {log}")
    finally:
        whiz.stop()
        if peer is not None:
            peer.stop()
    return {"whiz": results[0], "llama_server": results[1] if peer is not None else None}


def main(plan: CompletePlan) -> int:
    console = Console(stderr=True)

    def progress(text: str) -> None:
        console.print(f"[dim]{text}[/dim]")

    work = cases(plan.quick, plan.file_tokens * 4)
    limit = plan.requests or (QUICK_REQUESTS if plan.quick else REQUESTS_PER_FUNCTION)
    result: dict[str, Any] = {"bench": "complete", "model": plan.model, "functions": [c.name for c in work]}
    result.update(run_all(plan, work, limit, progress))
    if plan.llama_server is None:
        result["note"] = "llama-server skipped: give --llama-server PATH to compare"
    table = Table(title=f"whiz bench complete — model {plan.model} — {len(work)} functions")
    table.add_column("measure")
    for name in ("whiz", "llama_server"):
        table.add_column(name, justify="right")
    for key in (
        "requests",
        "first_token_ms_median",
        "line_ms_median",
        "line_ms_p95",
        "prefill_tokens_median",
        "acceptance",
    ):
        table.add_row(key, *(str((result[n] or {}).get(key, "-")) for n in ("whiz", "llama_server")))
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    print(json.dumps(result), flush=True)
    return 0
