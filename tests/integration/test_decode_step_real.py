"""One plain decode step must cost one lone row's decode, nothing more.

llama.cpp's CPU backend runs each decode as an OpenMP parallel region. libgomp keeps a team of
threads per thread that ever started one, and once a process holds more team threads than it has
CPUs it stops spinning at barriers: every barrier (about two thousand per token for the 0.5B) puts
the threads to sleep and wakes them again. Loading the runtime decodes on the loading thread (it
times a few batches) and the engine then decoded on its worker thread, so every token after
paid that: plain decode at 0.38x of llama.cpp's own on a 2-core machine, at 100-125% CPU.
This checks the cause, not a speed: all of llama.cpp's decodes run on one thread, a plain step
asks for one row of logits, and the threads sleep a few times per token, not thousands.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.conftest import model_threads
from whiz.config import ServeSettings
from whiz.engine.factory import load_engine
from whiz.engine.types import GenerateRequest, SamplingParams

pytestmark = pytest.mark.model

TOKENS = 24


def _voluntary_switches() -> int:
    """Times this process's threads blocked (slept) so far, from /proc."""
    from pathlib import Path

    total = 0
    for status in Path("/proc/self/task").glob("*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    total += int(line.split()[1])
        except OSError:  # a thread that ended meanwhile
            continue
    return total


def test_a_plain_decode_step_is_one_row_on_one_thread(monkeypatch):
    import llama_cpp

    decode_threads: set[int] = set()
    real_decode = llama_cpp.llama_decode

    def recording_decode(ctx, batch):
        decode_threads.add(threading.get_ident())
        return real_decode(ctx, batch)

    monkeypatch.setattr(llama_cpp, "llama_decode", recording_decode)
    settings = ServeSettings(
        model="qwen2.5-coder-0.5b",
        kv_budget_mb=256,
        ctx=2048,
        slots=2,
        prefix_cache=False,
        speculation=False,
        # Under pytest-xdist one thread (see model_threads): two threads spinning beside the busy
        # workers make the load alone take a minute. The decoding thread and the one row per step
        # are checked either way; the sleeps per token need a team, so a serial run checks them.
        threads=model_threads(),
    )

    async def run() -> tuple[list[list[tuple]], int, int]:
        engine = load_engine(settings)
        steps: list[list[tuple]] = []
        real_step = engine.runtime.decode

        def recording_step(rows):
            steps.append(list(rows))
            return real_step(rows)

        engine.runtime.decode = recording_step
        prompt = engine.tokenizer.encode("def fibonacci(n):\n    ")
        try:
            before = _voluntary_switches()
            request = GenerateRequest(
                prompt=prompt, max_tokens=TOKENS, sampling=SamplingParams(temperature=0.0), speculation=False
            )
            stream = engine.generate(request)
            generated = sum([len(chunk.tokens) async for chunk in stream])
            return steps, generated, _voluntary_switches() - before
        finally:
            engine.close()

    steps, generated, switches = asyncio.run(run())
    assert generated == TOKENS
    decode_steps = steps[1:]  # the first holds the prompt
    assert decode_steps and all(len(rows) == 1 and rows[0][3] for rows in decode_steps)
    assert len(decode_threads) == 1, "llama.cpp decoded on several threads: a second OpenMP team"
    # Unthrottled, the threads sleep once or twice per token (the hand-offs between steps).
    assert switches / generated < 50, f"{switches / generated:.0f} thread sleeps per token"
