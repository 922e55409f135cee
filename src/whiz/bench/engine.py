"""`whiz bench engine`: whiz's engine beside llama.cpp's own, on the same model file and threads.

For each model and each context (a short prompt and a long one), both sides prefill a prompt and
greedily decode the same number of tokens: whiz through its engine (the scheduler the server
runs, without HTTP, speculation off), llama.cpp through llama-cpp-python's `Llama`. Rounds
alternate the two sides and each round's prompt is new (nothing cached), so drift on a shared
machine falls on both; a ratio is the median of the rounds' ratios. Then, if asked, speculation:
a prompt whose continuation repeats code already in it, where prompt lookup drafts well, decoded
with and without drafts (the outputs must be identical) and beside llama.cpp on it.

llama.cpp runs in a child process (whiz.bench.llama_baseline) with its own defaults: in whiz's
process it would get whiz's settings for exactness, and its OpenMP team would be a second one
there, which makes both sides slow (see whiz.engine.compute_thread). The two never run at once.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from whiz.bench.corpus import Corpus
from whiz.bench.llama_baseline import stock_env
from whiz.bench.report import rounded
from whiz.engine.types import GenerateRequest, SamplingParams

FAST_MODEL = "qwen2.5-coder-0.5b"
DEEP_MODEL = "qwen2.5-coder-1.5b"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class EnginePlan:
    models: tuple[str, ...] = (FAST_MODEL,)
    threads: int | None = None
    """llama.cpp threads on both sides (default: all cores)."""
    quick: bool = False
    speculation: bool = True

    @property
    def tokens(self) -> int:
        return 48 if self.quick else 128

    @property
    def rounds(self) -> int:
        return 2 if self.quick else 3

    def rounds_for(self, context: str) -> int:
        """More rounds where they are cheap: a short context's run takes seconds, and its ratio,
        the middle one of few rounds, moved by 5% from one run to the next with 3."""
        return (3 if self.quick else 7) if context == "short" else self.rounds

    @property
    def contexts(self) -> dict[str, int]:
        """Prompt lengths in tokens: the issue's 32-token prompt and a long context."""
        return {"short": 32, "long": 1024 if self.quick else 4096}


@dataclass
class Run:
    """One generation: prompt tokens per second, decoded tokens per second, what it wrote."""

    prefill_tok_s: float
    decode_tok_s: float
    tokens: list[int] = field(default_factory=list)


class Side(Protocol):
    name: str

    def run(self, prompt: list[int], n: int) -> Run: ...


class WhizSide:
    """whiz's engine (any `Scheduler`), asked as the server asks it, minus HTTP."""

    name = "whiz"

    def __init__(self, engine, *, speculation: bool = False):
        self.engine = engine
        self.speculation = speculation

    def run(self, prompt: list[int], n: int) -> Run:
        async def generate():
            request = GenerateRequest(
                prompt=list(prompt),
                max_tokens=n + 1,  # the first token ends the prefill; n more are the decode
                sampling=SamplingParams(temperature=0.0),
                speculation=self.speculation,
            )
            stream = self.engine.generate(request)
            tokens = [t async for chunk in stream for t in chunk.tokens]
            return tokens, stream.stats

        tokens, stats = asyncio.run(generate())
        if stats.error:
            raise RuntimeError(f"whiz's engine failed: {stats.error}")
        prefill = stats.prefill_tokens / (stats.prefill_ms / 1000) if stats.prefill_ms > 0 else 0.0
        decode = (len(tokens) - 1) / (stats.decode_ms / 1000) if stats.decode_ms > 0 else 0.0
        return Run(prefill, decode, tokens)


class LlamaSide:
    """llama-cpp-python's own `Llama` on the same file and threads, in a child process (see
    whiz.bench.llama_baseline): the floor whiz must reach."""

    name = "llama.cpp"

    def __init__(self, model_path: Path, *, threads: int, n_ctx: int):
        self._child = subprocess.Popen(
            [sys.executable, "-m", "whiz.bench.llama_baseline", str(model_path), str(threads), str(n_ctx)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=stock_env(),  # llama.cpp's defaults
        )
        self._read()  # loaded

    def _read(self) -> dict[str, Any]:
        line = self._child.stdout.readline()
        if not line:
            raise RuntimeError(f"the llama.cpp baseline exited (code {self._child.wait()})")
        return json.loads(line)

    def run(self, prompt: list[int], n: int) -> Run:
        self._child.stdin.write(json.dumps({"prompt": list(prompt), "n": n}) + "\n")
        self._child.stdin.flush()
        reply = self._read()
        return Run(reply["prefill_tok_s"], reply["decode_tok_s"], reply["tokens"])

    def close(self) -> None:
        self._child.stdin.close()
        try:
            self._child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._child.kill()


def _median_ratio(mine: list[float], theirs: list[float]) -> float:
    return statistics.median(a / b if b else 0.0 for a, b in zip(mine, theirs, strict=True))


def compare(whiz: Side, llama: Side, prompts: list[list[int]], n: int) -> dict[str, Any]:
    """Both sides on each prompt, alternating which goes first; medians and paired ratios."""
    runs: dict[str, list[Run]] = {"whiz": [], "llama": []}
    for i, prompt in enumerate(prompts):
        order = [("whiz", whiz), ("llama", llama)]
        for key, side in order if i % 2 == 0 else order[::-1]:
            runs[key].append(side.run(prompt, n))
    row: dict[str, Any] = {"prompt_tokens": len(prompts[0]), "decode_tokens": n, "rounds": len(prompts)}
    for what in ("decode", "prefill"):
        mine = [getattr(r, f"{what}_tok_s") for r in runs["whiz"]]
        theirs = [getattr(r, f"{what}_tok_s") for r in runs["llama"]]
        row[f"whiz_{what}_tok_s"] = statistics.median(mine)
        row[f"llama_{what}_tok_s"] = statistics.median(theirs)
        row[f"{what}_ratio"] = _median_ratio(mine, theirs)
    return row


def prompts_of(tokenizer, corpus: Corpus, length: int, count: int) -> list[list[int]]:
    """`count` different prompts of exactly `length` tokens of source code (mid-file, so the
    model goes on writing code rather than stopping)."""
    out = []
    for k in range(count):
        ids = tokenizer.encode(f"# part {k}\n" + corpus.text(length + 64))
        while len(ids) < length:
            ids += tokenizer.encode("\n" + corpus.text(length))
        out.append(ids[:length])
    return out


def copy_prompts(tokenizer, corpus: Corpus, count: int) -> list[list[int]]:
    """Prompts whose continuation repeats code they hold: where drafting from the prompt pays."""
    out = []
    for k in range(count):
        code = corpus.text(300)
        lines = code.splitlines()
        out.append(tokenizer.encode(f"{code}\n\n# Copy {k}: the code above again, unchanged:\n{lines[0]}\n"))
    return out


def speculation_row(
    plain: Side, drafting: Side, llama: Side, prompts: list[list[int]], n: int
) -> dict[str, Any]:
    """Decode with drafts beside whiz without them and beside llama.cpp; outputs must match."""
    spec, without, floor, identical = [], [], [], True
    for prompt in prompts:
        a, b, c = drafting.run(prompt, n), plain.run(prompt, n), llama.run(prompt, n)
        identical = identical and a.tokens == b.tokens
        spec.append(a.decode_tok_s)
        without.append(b.decode_tok_s)
        floor.append(c.decode_tok_s)
    return {
        "spec_decode_tok_s": statistics.median(spec),
        "whiz_decode_tok_s": statistics.median(without),
        "llama_decode_tok_s": statistics.median(floor),
        "over_whiz_plain": _median_ratio(spec, without),
        "over_llama": _median_ratio(spec, floor),
        "identical": identical,
    }


def measure_model(
    engine, llama: Side, plan: EnginePlan, progress: Progress, corpus: Corpus | None = None
) -> dict[str, Any]:
    """Every context's comparison for one loaded model, then speculation if the plan asks."""
    corpus = corpus or Corpus()
    whiz = WhizSide(engine)
    result: dict[str, Any] = {"contexts": {}}
    for name, length in plan.contexts.items():
        rounds = plan.rounds_for(name)
        progress(f"{name} context: {length}-token prompts, {plan.tokens} tokens, {rounds} rounds")
        prompts = prompts_of(engine.tokenizer, corpus, length, rounds)
        result["contexts"][name] = compare(whiz, llama, prompts, plan.tokens)
    if plan.speculation:
        progress("speculation: code the reply repeats, with and without drafts")
        prompts = copy_prompts(engine.tokenizer, corpus, plan.rounds)
        drafting = WhizSide(engine, speculation=True)
        result["speculation"] = speculation_row(whiz, drafting, llama, prompts, plan.tokens)
    return result


def _cpu() -> dict[str, Any]:
    """The CPU's name and the vector extensions that choose llama.cpp's kernels."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
    return {"name": name, "cores": os.cpu_count(), "flags": [f for f in wanted if f in flags]}


def busy(load: tuple[float, float] | None, threads: int) -> bool:
    """Whether other work ran beside the bench's own threads: then llama.cpp's threads wait for one
    another at every barrier of every matmul (thousands per token) and both sides slow down
    erratically, several times over, so the figures measure the other work."""
    return load is not None and max(load) > threads + 1


def summarize(
    results: dict[str, dict[str, Any]], plan: EnginePlan, load: tuple[float, float] | None = None
) -> dict[str, Any]:
    """One JSON object: the first model's short-context decode and long-context prefill on top.

    `load` is the 1-minute load average when the bench started and when it ended."""
    first = results[plan.models[0]]["contexts"]
    short, long = first["short"], first["long"]
    return {
        "bench": "engine",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpu": _cpu(),
        "threads": plan.threads or os.cpu_count(),
        "quick": plan.quick,
        "load_average": list(load) if load is not None else None,
        "whiz_decode_tok_s": short["whiz_decode_tok_s"],
        "llama_decode_tok_s": short["llama_decode_tok_s"],
        "ratio": short["decode_ratio"],
        "whiz_prefill_tok_s": long["whiz_prefill_tok_s"],
        "llama_prefill_tok_s": long["llama_prefill_tok_s"],
        "prefill_ratio": long["prefill_ratio"],
        "models": results,
    }


def print_report(summary: dict[str, Any], console: Console | None = None) -> None:
    """The table, then the summary as the last line of stdout (plain JSON)."""
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    table = Table(title=f"whiz bench engine — {summary['cpu']['name']} — {summary['threads']} threads")
    for name in ("model", "context", "measure", "whiz tok/s", "llama.cpp tok/s", "ratio"):
        table.add_column(name, justify="left" if name in ("model", "context", "measure") else "right")
    for model, result in summary["models"].items():
        for context, row in result["contexts"].items():
            for what in ("decode", "prefill"):
                table.add_row(
                    model,
                    f"{context} ({row['prompt_tokens']})",
                    what,
                    f"{row[f'whiz_{what}_tok_s']:.1f}",
                    f"{row[f'llama_{what}_tok_s']:.1f}",
                    f"{row[f'{what}_ratio']:.2f}",
                )
        spec = result.get("speculation")
        if spec:
            same = "identical" if spec["identical"] else "OUTPUT DIFFERS"
            table.add_row(
                model,
                "copy",
                f"decode, drafts ({same}; {spec['over_whiz_plain']:.2f}x whiz plain)",
                f"{spec['spec_decode_tok_s']:.1f}",
                f"{spec['llama_decode_tok_s']:.1f}",
                f"{spec['over_llama']:.2f}",
            )
    console.print(table)
    load = summary.get("load_average")
    if busy(tuple(load) if load else None, summary["threads"]):
        console.print(
            f"The machine was busy (load average {load[0]:.1f} at the start, {load[1]:.1f} at the end): "
            "these figures measure the other work."
        )
    print(json.dumps(rounded(summary)), flush=True)


def _run_model(model: str, plan: EnginePlan, progress: Progress) -> dict[str, Any]:
    from whiz.config import ServeSettings
    from whiz.engine.factory import load_engine
    from whiz.models import ModelStore, default_home

    path = ModelStore(default_home()).resolve(model, pull=False)
    threads = plan.threads or os.cpu_count() or 2
    n_ctx = max(plan.contexts.values()) + plan.tokens + 64
    # Two slots of the longest context: as much KV cache as the runs need, no more.
    settings = ServeSettings(
        model=model,
        ctx=n_ctx,
        slots=2,
        kv_budget_mb=1024,
        prefix_cache=False,
        threads=threads,
        threads_follow_load=False,  # both sides on the same threads, whatever else runs
    )
    progress(f"{model}: loading whiz's engine and llama.cpp's Llama ({path.name}, {threads} threads)")
    engine = load_engine(settings)
    llama = LlamaSide(path, threads=threads, n_ctx=n_ctx)
    try:
        return measure_model(engine, llama, plan, progress)
    finally:
        llama.close()
        engine.close()


def main(plan: EnginePlan) -> int:
    from whiz.models import ModelNotInstalledError

    console = Console(stderr=True)

    def progress(message: str) -> None:
        console.print(f"[dim]{message}[/dim]")

    results = {}
    load_start = os.getloadavg()[0]
    for model in plan.models:
        try:
            results[model] = _run_model(model, plan, progress)
        except ModelNotInstalledError:
            if model == plan.models[0]:
                console.print(f"{model} is not installed: `whiz models pull {model}`")
                return 1
            progress(f"{model} is not installed (`whiz models pull {model}`): skipped")
    print_report(summarize(results, plan, (load_start, os.getloadavg()[0])))
    return 0
