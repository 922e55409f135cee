"""A prompt prefilled before a restart is restored from disk after it, and the output is the same.

Only the real model shows that llama.cpp's saved state, written by one context and read into
another's sequence (and cut short there), gives cells bit for bit like a prefill's: the greedy
tokens after a restore must equal the tokens after a prefill.
"""

from __future__ import annotations

import inspect
import json

import pytest

from tests.conftest import model_threads
from whiz.config import ServeSettings
from whiz.engine.factory import load_engine
from whiz.engine.types import GenerateRequest

pytestmark = pytest.mark.model

MAX_TOKENS = 24


async def greedy(engine, prompt: list[int]):
    stream = engine.generate(GenerateRequest(prompt=prompt, max_tokens=MAX_TOKENS))
    out = [t async for chunk in stream for t in chunk.tokens]
    return out, stream.stats


async def test_output_after_restoring_a_prefix_from_disk_equals_output_after_prefilling_it(tmp_path):
    settings = ServeSettings(
        ctx=2048,
        slots=2,
        kv_budget_mb=128,
        prefix_cache_dir=tmp_path,
        prefix_cache_min_tokens=512,  # prompts short enough to prefill three times in seconds
        threads=model_threads(),
    )
    engine = load_engine(settings)
    code = engine.tokenizer.encode(inspect.getsource(json.decoder) + inspect.getsource(json.encoder))
    long_prompt = code[:700]
    # Shares the first 600 tokens, then goes elsewhere: restored in part, the rest prefilled.
    branch = code[:600] + engine.tokenizer.encode("\n\n# A short summary of the module above:\n#")
    try:
        cold_long, stats = await greedy(engine, long_prompt)
        assert stats.prefill_tokens == len(long_prompt)
        cold_branch, _ = await greedy(engine, branch)  # shares the prefix in memory
    finally:
        engine.close()
    assert len(list(tmp_path.glob("*.kv"))) == 1

    engine = load_engine(settings)  # a restart
    try:
        warm_long, stats = await greedy(engine, long_prompt)
        assert stats.cached_tokens == len(long_prompt) - 1 and stats.prefill_tokens == 1
        assert engine.status()["prefix_cache_restores"] == 1
    finally:
        engine.close()
    assert warm_long == cold_long

    engine = load_engine(settings)  # another, where only part of the saved prompt is wanted
    try:
        warm_branch, stats = await greedy(engine, branch)
        assert stats.cached_tokens == 600 and stats.prefill_tokens == len(branch) - 600
    finally:
        engine.close()
    assert warm_branch == cold_branch
