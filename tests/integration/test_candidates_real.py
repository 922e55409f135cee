"""N candidates decoded together with the real model are exactly the candidates decoded alone."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import model_threads
from whiz.chat.messages import Message
from whiz.chat.template import ChatTemplate
from whiz.config import ServeSettings
from whiz.engine.factory import load_engine
from whiz.engine.types import GenerateRequest, SamplingParams

pytestmark = pytest.mark.model


async def test_parallel_candidates_equal_the_same_seeds_run_one_at_a_time():
    engine = load_engine(
        ServeSettings(model="qwen2.5-coder-0.5b", ctx=1024, slots=4, kv_budget_mb=64, threads=model_threads())
    )
    try:
        prompt = ChatTemplate(engine.tokenizer).encode(
            [Message("user", "Write a one-line Python function that reverses a string.")]
        )

        def request(seed: int) -> GenerateRequest:
            sampling = SamplingParams(temperature=0.9, top_p=0.95, top_k=40, seed=seed)
            return GenerateRequest(prompt=prompt, max_tokens=24, sampling=sampling)

        async def tokens(stream) -> list[int]:
            return [t async for c in stream for t in c.tokens]

        streams = engine.generate_many(request(100), 3)
        together = await asyncio.gather(*(tokens(s) for s in streams))
        # Prefilled once: the later candidates started from a copy of the first one's cache.
        assert [s.stats.cached_tokens for s in streams[1:]] == [len(prompt) - 1] * 2
        alone = [await tokens(engine.generate(request(100 + i))) for i in range(3)]
        assert together == alone
        assert len({tuple(t) for t in together}) > 1  # the seeds made different candidates
    finally:
        engine.close()
