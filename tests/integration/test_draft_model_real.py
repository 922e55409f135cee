"""The draft-model drafter with real models: drafted output is plain greedy output.

The 0.5B drafts for itself here (the whole path runs: a second runtime with the fast,
batch-dependent kernels, one draft sequence per slot, catch-up and rollback), so `make test`
needs no second download. The 1.5B pairing runs too where `whiz models pull qwen2.5-coder-1.5b`
has installed it.
"""

from __future__ import annotations

import pytest

from tests.conftest import model_threads
from whiz.chat.messages import Message
from whiz.chat.template import ChatTemplate
from whiz.config import ServeSettings
from whiz.engine.factory import load_engine
from whiz.engine.speculative import BatchCost
from whiz.engine.types import GenerateRequest
from whiz.models import ModelStore, default_home

pytestmark = pytest.mark.model

PROMPTS = [
    "Write a Python function that returns the n-th prime number, with a docstring.",
    "Explain in three sentences what a context manager is in Python.",
]


def engine_for(model: str, draft: str):
    settings = ServeSettings(
        model=model, draft_model=draft, ctx=1024, slots=2, kv_budget_mb=64, threads=model_threads()
    )
    engine = load_engine(settings)
    # Drafting with a model as slow as the one it drafts for never pays, so the engine would
    # rightly stay plain; pretend drafting is cheap so that every step takes the drafting path.
    engine.draft_model.step_ms = 0.1
    # Likewise the verification batches: timed at start, they look dear on a busy machine, and the
    # engine would rightly draft nothing; what is tested here is the path, not the choice.
    engine.batch_cost = BatchCost({1: 20.0, 64: 25.0})
    return engine


async def generate(engine, text: str, **kw) -> tuple[list[int], object]:
    prompt = ChatTemplate(engine.tokenizer).encode([Message("user", text)])
    stream = engine.generate(GenerateRequest(prompt=prompt, max_tokens=24, **kw))
    return [t async for c in stream for t in c.tokens], stream.stats


async def check_identity(engine) -> None:
    for text in PROMPTS:
        plain, _ = await generate(engine, text, speculation=False)
        drafted, stats = await generate(engine, text, session=text)
        assert drafted == plain, text
        assert stats.draft_accepted > 0
    # Every draft sequence holds exactly what its bookkeeping says (rollbacks left no stray cells).
    model = engine.draft_model
    for seq, tokens in enumerate(model.tokens):
        pos_max = model.runtime._ll.llama_memory_seq_pos_max(model.runtime._mem, seq)
        assert pos_max == len(tokens) - 1


async def test_the_small_model_drafting_for_itself_gives_plain_output():
    engine = engine_for("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b")
    try:
        await check_identity(engine)
        assert engine.draft_model.drafted_tokens > 0
    finally:
        engine.close()


@pytest.mark.skipif(
    ModelStore(default_home()).path("qwen2.5-coder-1.5b") is None,
    reason="the 1.5B is not installed (whiz models pull qwen2.5-coder-1.5b)",
)
async def test_the_small_model_drafting_for_the_big_one_gives_plain_output():
    engine = engine_for("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
    try:
        await check_identity(engine)
    finally:
        engine.close()
