"""`whiz bench stall`: the longest wait between two tokens of a plain stream beside a hostile request.

One engine in this process (the scheduler the server runs, no HTTP). A plain stream decodes alone,
then again with one worst-case request sent after its first few tokens:

- `long-schema`: a tool-call request whose nested `anyOf` schema makes a prompt of ~900 tokens
  (its prefill shares the stream's steps);
- `forced-nesting`: a required call whose recursive schema has two kinds of array that open alike
  and no other value, so the grammar makes the model open array after array and the ways to read
  the call double with each `[` (the grammar matcher's cost with them);
- `wrong-prediction`: a long predicted output that never matches what the model writes (drafts to
  verify on every step).

Each row gives the stream's largest gap between tokens (its first token's wait left out), its
whole time, and how the hostile request ended. The last line is JSON.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import platform
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from whiz.bench.attackers import nested_any_of
from whiz.chat.messages import Message, Tool
from whiz.chat.template import ChatTemplate
from whiz.chat.toolgrammar import tool_call_grammar
from whiz.engine.types import GenerateRequest

PLAIN_ASK = "Write a long story about a cat who learns to program."

FORCED_NESTING = {
    "$defs": {
        "n": {
            "anyOf": [
                {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1},
                {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1, "maxItems": 3},
            ]
        }
    },
    "type": "object",
    "properties": {"x": {"$ref": "#/$defs/n"}},
    "required": ["x"],
}
"""Every value is an array of values: the grammar allows only `[` after `"x": `, and each `[` may
open either kind, known only at its `]`."""


@dataclass(frozen=True)
class StallPlan:
    model: str = "qwen2.5-coder-0.5b"
    plain_tokens: int = 64
    hostile_tokens: int = 48
    """Tokens each hostile request may write; `forced-nesting` gets four times as many (the model
    pads the arrays with whitespace, and the readings multiply with the `[`s alone)."""
    cases: tuple[str, ...] = ("long-schema", "forced-nesting", "wrong-prediction")


def _hostile(case: str, template: ChatTemplate, tokens: int, tokenizer) -> GenerateRequest:
    if case == "long-schema":
        tool = Tool("f", "", nested_any_of(4, 3))
        grammar = tool_call_grammar([tool], required=True)
        prompt = template.encode([Message("user", "Call f.")], [tool])
        return GenerateRequest(prompt, max_tokens=tokens, grammar=grammar)
    if case == "forced-nesting":
        tool = Tool("f", "", FORCED_NESTING)
        grammar = tool_call_grammar([tool], required=True)
        # Asked to write the brackets without spaces, the model writes `[[` tokens: each one
        # quadruples the readings, so one token's matching jumps from a fraction of the budget
        # to many times it, past the budget's reach between calls.
        ask = 'Call f with {"x": ' + "[" * 40 + "]" * 40 + "} written exactly so, without spaces."
        prompt = template.encode([Message("user", ask)], [tool])
        return GenerateRequest(prompt, max_tokens=tokens, grammar=grammar)
    if case == "wrong-prediction":
        prompt = template.encode([Message("user", "Say hello.")])
        prediction = tokenizer.encode("def unrelated(a, b):\n    return a * b + 17\n" * 2000)
        return GenerateRequest(prompt, max_tokens=tokens, prediction=prediction)
    raise ValueError(f"no stall case named {case!r}")


async def _plain(
    engine, prompt: list[int], tokens: int, started: asyncio.Event | None = None
) -> tuple[list[float], int]:
    """When each chunk of the stream came (a chunk is a step's tokens), and how many tokens."""
    times = [time.monotonic()]
    written = 0
    async for chunk in engine.generate(GenerateRequest(prompt, max_tokens=tokens)):
        times.append(time.monotonic())
        written += len(chunk.tokens)
        if started is not None and len(times) == 5:
            started.set()
    if started is not None:
        started.set()
    return times, written


def _gaps(stream: tuple[list[float], int]) -> dict[str, float | int | None]:
    times, written = stream
    after_first = [b - a for a, b in zip(times[1:], times[2:], strict=False)]
    return {
        "ttft_s": round(times[1] - times[0], 3) if len(times) > 1 else None,
        "max_gap_s": round(max(after_first), 3) if after_first else 0.0,
        "total_s": round(times[-1] - times[0], 3),
        "tokens": written,
    }


async def run_stall(plan: StallPlan, engine) -> dict[str, Any]:
    template = ChatTemplate(engine.tokenizer)
    plain_prompt = template.encode([Message("user", PLAIN_ASK)])
    await _plain(engine, plain_prompt, 8)  # warm-up
    results: dict[str, Any] = {"alone": _gaps(await _plain(engine, plain_prompt, plan.plain_tokens))}
    for case in plan.cases:
        started = asyncio.Event()
        plain = asyncio.create_task(_plain(engine, plain_prompt, plan.plain_tokens, started))
        await started.wait()
        t0 = time.monotonic()
        tokens = plan.hostile_tokens * (4 if case == "forced-nesting" else 1)
        stream = engine.generate(_hostile(case, template, tokens, engine.tokenizer))
        out: list[int] = []
        async for chunk in stream:
            out += chunk.tokens
        row = _gaps(await plain)
        row["hostile"] = {
            "finish": stream.stats.finish_reason,
            "tokens": len(out),
            "text": b"".join(engine.tokenizer.piece(t) for t in out).decode(errors="replace")[:120],
            "s": round(time.monotonic() - t0, 2),
            "error": (stream.stats.error or "")[:160],
            "notes": {k: v[:100] for k, v in stream.stats.notes.items()},
        }
        results[case] = row
    return results


def print_stall(results: dict[str, Any], summary: dict[str, Any]) -> None:
    console = Console(width=None if os.isatty(1) else 160)
    table = Table(title=f"whiz bench stall — model {summary['model']}")
    for name in ("beside", "max gap (s)", "total (s)", "ttft (s)", "hostile request"):
        table.add_column(name)
    for case, row in results.items():
        h = row.get("hostile")
        told = "" if h is None else f"{h['finish']}, {h['tokens']} tokens, {h['s']} s {h['error'][:60]}"
        table.add_row(case, str(row["max_gap_s"]), str(row["total_s"]), str(row["ttft_s"]), told)
    console.print(table)
    print(json.dumps(summary), flush=True)


def main(plan: StallPlan) -> int:
    from whiz.config import ServeSettings
    from whiz.engine.factory import load_engine

    engine = load_engine(ServeSettings(model=plan.model, prefix_cache=False))
    try:
        results = asyncio.run(run_stall(plan, engine))
    finally:
        engine.close()
    summary = {
        "bench": "stall",
        "model": plan.model,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "results": results,
        "worst_gap_s": max(r["max_gap_s"] or 0 for r in results.values()),
    }
    print_stall(results, summary)
    return 0
