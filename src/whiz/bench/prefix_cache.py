"""`whiz bench prefix-cache`: time to first token over a long shared prefix, cold, from memory, and
from the prefix cache on disk after a restart.

This is Codex's case: every session starts with the same ~6k-token prompt. Four requests share a
prefix of `prefix_tokens` (a never-seen nonce first, so nothing is cached before) and differ in a
short tail:

- cold: a fresh engine prefills all of it (and saves it to disk);
- memory: a second session in the same engine copies the prefix from the first's slot;
- disk: after a restart (a new engine over the same cache folder), restored from the file, which
  the OS likely still has in its page cache, as after a plain server restart;
- disk, uncached read: another restart, with the file dropped from the page cache first
  (posix_fadvise), as after a reboot.

It runs engines in this process, so TTFT is the engine's (no HTTP); the disk runs repeat the
cold and memory prompts and must produce their tokens exactly (temperature 0).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from whiz.bench.corpus import Corpus, nonce
from whiz.bench.report import rounded
from whiz.config import ServeSettings
from whiz.engine.factory import load_engine
from whiz.engine.types import GenerateRequest

Progress = Callable[[str], None]
REPLY_TOKENS = 8


async def _ttft(engine, prompt: list[int]) -> dict[str, Any]:
    stream = engine.generate(GenerateRequest(prompt=prompt, max_tokens=REPLY_TOKENS, speculation=False))
    tokens = [t async for chunk in stream for t in chunk.tokens]
    s = stream.stats
    return {
        "ttft_ms": s.ttft_ms,
        "cached_tokens": s.cached_tokens,
        "prefill_tokens": s.prefill_tokens,
        "tokens": tokens,
    }


def _drop_from_page_cache(directory: Path) -> None:
    for path in directory.glob("*.kv"):
        with contextlib.suppress(OSError, AttributeError), path.open("rb") as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


async def run_prefix_cache_bench(
    model: str, prefix_tokens: int, cache_dir: Path, progress: Progress, **settings: Any
) -> dict[str, Any]:
    """The four TTFTs, the engine load times, and whether restored output matched."""
    opts = ServeSettings(model=model, prefix_cache_dir=cache_dir, **settings)
    rows: dict[str, dict[str, Any]] = {}
    loads_s: list[float] = []

    def load():
        start = time.perf_counter()
        engine = load_engine(opts)
        loads_s.append(time.perf_counter() - start)
        return engine

    engine = load()
    tok = engine.tokenizer
    prefix = tok.encode(nonce() + "\n" + Corpus().text(prefix_tokens * 3 // 2))[:prefix_tokens]
    tails = [tok.encode(f"\n# Question {k}: what does the code above do? Answer:") for k in range(2)]
    prompts = [prefix + tail for tail in tails]
    try:
        progress(f"cold: prefilling {len(prompts[0])} tokens")
        rows["cold"] = await _ttft(engine, prompts[0])
        progress("memory: a second session over the same prefix")
        rows["memory"] = await _ttft(engine, prompts[1])
    finally:
        engine.close()  # waits for the file to be written
    saved_mb = sum(p.stat().st_size for p in cache_dir.glob("*.kv")) / 2**20

    for name, prompt, twin in (("disk", prompts[0], "cold"), ("disk_uncached", prompts[1], "memory")):
        if name == "disk_uncached":
            _drop_from_page_cache(cache_dir)
        progress(f"{name}: a restart, then the same prompt as {twin}")
        engine = load()
        try:
            rows[name] = await _ttft(engine, prompt)
        finally:
            engine.close()
        rows[name]["identical"] = rows[name]["tokens"] == rows[twin]["tokens"]
    return {"rows": rows, "load_s": loads_s, "saved_mb": saved_mb, "prefix_tokens": prefix_tokens}


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    rows = result["rows"]
    cold = rows["cold"]["ttft_ms"]
    return {
        "bench": "prefix-cache",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "prefix_tokens": result["prefix_tokens"],
        "saved_mb": result["saved_mb"],
        "engine_load_s": result["load_s"],
        **{f"{name}_ttft_ms": row["ttft_ms"] for name, row in rows.items()},
        "cold_over_disk": cold / rows["disk"]["ttft_ms"],
        "cold_over_disk_uncached": cold / rows["disk_uncached"]["ttft_ms"],
        "disk_over_memory": rows["disk"]["ttft_ms"] / rows["memory"]["ttft_ms"],
        "identical": all(row.get("identical", True) for row in rows.values()),
    }


def main(model: str, prefix_tokens: int, cache_dir: Path | None = None, **settings: Any) -> int:
    import asyncio

    console = Console(stderr=True)

    def progress(message: str) -> None:
        console.print(f"[dim]{message}[/dim]")

    with tempfile.TemporaryDirectory(prefix="whiz-kv-bench-") as tmp:
        directory = cache_dir or Path(tmp)
        result = asyncio.run(run_prefix_cache_bench(model, prefix_tokens, directory, progress, **settings))
    table = Table("request", "TTFT ms", "cached", "prefilled", "same tokens")
    for name, row in result["rows"].items():
        same = {True: "yes", False: "NO"}.get(row.get("identical"), "-")
        cached, prefilled = str(row["cached_tokens"]), str(row["prefill_tokens"])
        table.add_row(name, f"{row['ttft_ms']:.0f}", cached, prefilled, same)
    Console().print(table)
    summary = summarize(result)
    print(json.dumps(rounded(summary)))
    sys.stdout.flush()
    return 0 if summary["identical"] else 1
