"""`whiz bench parallel`: N candidates of one prompt decoded together, against one after another.

Healing asks for N candidate edits of one prompt. Decoded together (one request with `n`), the
server prefills the prompt once and runs the N sequences in one batch per step; decoded one after
another (N requests with n=1), every candidate pays every step alone. Both modes sample with the
same seeds (candidate i: seed + i), so on whiz, whose kernels give the same logits in any batch,
they write the same candidates: the bench checks that, then compares the wall time.

Each prompt is loaded into the cache first (a one-token request), so neither mode pays the
prefill of the shared prompt, and the order of the modes alternates from round to round.
Speculation is off, so that what is measured is batching alone.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from whiz.bench.report import rounded
from whiz.client import ClientError, HttpClient

PROMPTS = (
    "Write a Python function `merge_intervals(intervals)` that merges overlapping intervals, "
    "with a docstring and two doctest examples.",
    "Fix the bug in this function and return the corrected code only:\n\n```python\n"
    "def mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(xs) - 1\n```",
)

Progress = Callable[[str], None]


@dataclass
class ModeRun:
    """One mode on one prompt: wall time, the candidates' texts and output tokens."""

    seconds: float
    texts: list[str]
    tokens: int


@dataclass
class Trial:
    prompt: int
    round: int
    sequential: ModeRun
    parallel: ModeRun

    @property
    def identical(self) -> bool:
        return self.sequential.texts == self.parallel.texts

    @property
    def speedup(self) -> float:
        return self.sequential.seconds / self.parallel.seconds if self.parallel.seconds > 0 else 0.0


@dataclass
class ParallelBench:
    """Runs the two modes against one server."""

    http: HttpClient
    model: str
    n: int = 5
    max_tokens: int = 128
    temperature: float = 0.7
    seed: int = 1
    trials: list[Trial] = field(default_factory=list)

    def body(self, prompt: str, *, n: int, seed: int, max_tokens: int | None = None) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "n": n,
            "seed": seed,
            "temperature": self.temperature,
            "max_tokens": max_tokens or self.max_tokens,
            "whiz": {"speculation": False},
        }

    async def sequential(self, prompt: str) -> ModeRun:
        start = time.perf_counter()
        texts, tokens = [], 0
        for i in range(self.n):
            out = await self.http.post("/chat/completions", self.body(prompt, n=1, seed=self.seed + i))
            texts.append(out["choices"][0]["message"]["content"] or "")
            tokens += out.get("usage", {}).get("completion_tokens", 0)
        return ModeRun(time.perf_counter() - start, texts, tokens)

    async def parallel(self, prompt: str) -> ModeRun:
        start = time.perf_counter()
        out = await self.http.post("/chat/completions", self.body(prompt, n=self.n, seed=self.seed))
        seconds = time.perf_counter() - start
        choices = sorted(out["choices"], key=lambda c: c["index"])
        if len(choices) != self.n:
            raise ClientError(f"asked for n={self.n} candidates, the server sent {len(choices)}")
        texts = [c["message"]["content"] or "" for c in choices]
        return ModeRun(seconds, texts, out.get("usage", {}).get("completion_tokens", 0))

    async def trial(self, index: int, prompt: str, round_: int) -> Trial:
        # Load the prompt into the cache, so that neither mode pays its prefill.
        await self.http.post("/chat/completions", self.body(prompt, n=1, seed=0, max_tokens=1))
        if round_ % 2 == 0:
            seq = await self.sequential(prompt)
            par = await self.parallel(prompt)
        else:
            par = await self.parallel(prompt)
            seq = await self.sequential(prompt)
        trial = Trial(index, round_, seq, par)
        self.trials.append(trial)
        return trial


def summarize(bench: ParallelBench, target: str) -> dict[str, Any]:
    """The JSON line: totals per mode, the ratio of their times, and whether candidates matched."""
    seq_s = sum(t.sequential.seconds for t in bench.trials)
    par_s = sum(t.parallel.seconds for t in bench.trials)
    seq_tokens = sum(t.sequential.tokens for t in bench.trials)
    par_tokens = sum(t.parallel.tokens for t in bench.trials)
    return rounded(
        {
            "bench": "parallel",
            "target": target,
            "model": bench.model,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "n": bench.n,
            "max_tokens": bench.max_tokens,
            "temperature": bench.temperature,
            "trials": len(bench.trials),
            "sequential": {
                "seconds": seq_s,
                "tokens": seq_tokens,
                "tokens_per_s": seq_tokens / seq_s if seq_s else 0.0,
            },
            "parallel": {
                "seconds": par_s,
                "tokens": par_tokens,
                "tokens_per_s": par_tokens / par_s if par_s else 0.0,
            },
            "speedup": seq_s / par_s if par_s else 0.0,
            "median_trial_speedup": statistics.median(t.speedup for t in bench.trials),
            "identical_candidates": sum(t.identical for t in bench.trials),
        }
    )


def print_report(summary: dict[str, Any], console: Console | None = None) -> None:
    """The table for people, then the summary as the last line of stdout."""
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    n = summary["n"]
    table = Table(title=f"whiz bench parallel — {summary['target']} — model {summary['model']}")
    for name in ("mode", "seconds", "output tokens", "tokens/s"):
        table.add_column(name, justify="left" if name == "mode" else "right")
    for mode, label in (
        ("sequential", f"{n} requests, one after another"),
        ("parallel", f"one request, n={n}"),
    ):
        row = summary[mode]
        table.add_row(label, f"{row['seconds']:.2f}", str(row["tokens"]), f"{row['tokens_per_s']:.1f}")
    console.print(table)
    console.print(
        f"parallel is {summary['speedup']:.2f}x faster in total (median per trial "
        f"{summary['median_trial_speedup']:.2f}x); identical candidates in "
        f"{summary['identical_candidates']}/{summary['trials']} trials",
        highlight=False,
    )
    print(json.dumps(summary), flush=True)


@dataclass(frozen=True)
class ParallelPlan:
    """What one run measures, and against which server."""

    target: str
    model: str | None = None
    """The model to request; None: the server's first."""
    api_key: str | None = None
    n: int = 5
    """Candidates per prompt."""
    max_tokens: int = 128
    rounds: int = 2
    """Times each prompt runs in each mode."""
    temperature: float = 0.7

    def problem(self) -> str | None:
        """What is wrong with the sizes, in one line; None when they are usable."""
        if self.n < 2 or self.max_tokens < 1 or self.rounds < 1:
            return "need --n >= 2, --max-tokens >= 1 and --rounds >= 1"
        return None


async def run_parallel_bench_async(plan: ParallelPlan, progress: Progress | None = None) -> dict[str, Any]:
    """Every prompt, `rounds` times, in both modes; returns the summary the JSON line holds."""
    say = progress or (lambda _: None)
    async with HttpClient(plan.target, plan.api_key) as http:
        model = plan.model
        if not model:
            models = await http.models()
            if not models:
                raise ClientError(f"{http.base}/models lists no model; pass --model")
            model = models[0]
        bench = ParallelBench(http, model, n=plan.n, max_tokens=plan.max_tokens, temperature=plan.temperature)
        for round_ in range(plan.rounds):
            for i, prompt in enumerate(PROMPTS):
                t = await bench.trial(i, prompt, round_)
                say(
                    f"round {round_ + 1} prompt {i + 1}: sequential {t.sequential.seconds:.2f} s, "
                    f"parallel {t.parallel.seconds:.2f} s ({t.speedup:.2f}x), "
                    f"{'identical' if t.identical else 'DIFFERENT'} candidates"
                )
        return summarize(bench, plan.target)


def main(plan: ParallelPlan) -> int:
    """`whiz bench parallel`: the table and the JSON line; 0 on success, 1 if the server failed us,
    2 for bad arguments."""
    if problem := plan.problem():
        print(f"whiz bench parallel: {problem}", file=sys.stderr)
        return 2

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        summary = asyncio.run(run_parallel_bench_async(plan, progress))
    except ClientError as exc:
        print(f"whiz bench parallel: {exc}", file=sys.stderr)
        return 1
    print_report(summary)
    return 0
