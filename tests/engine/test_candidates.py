"""N candidates of one prompt (`generate_many`): one prefill, one batch per step, own seeds."""

from __future__ import annotations

import asyncio

import pytest

from whiz.chat.messages import Message
from whiz.chat.template import ChatTemplate
from whiz.engine.fake import fake_engine
from whiz.engine.types import GenerateRequest, SamplingParams

REPLY = "candidate answer"


def script(conversation: str) -> str:
    return REPLY


def prompt(engine) -> list[int]:
    # A long prompt, so prefilling it once or N times is plain to see in the decoded rows.
    return ChatTemplate(engine.tokenizer).encode([Message("user", "context line\n" * 60)])


async def collect(streams) -> list[list[int]]:
    async def one(stream):
        return [t async for c in stream for t in c.tokens]

    return list(await asyncio.gather(*(one(s) for s in streams)))


def make(**kw):
    return fake_engine(script, step_s=0.0, token_s=0.0, **kw)


async def test_candidates_prefill_the_prompt_once_and_decode_together():
    engine = make()
    try:
        p = prompt(engine)
        streams = engine.generate_many(GenerateRequest(prompt=p, max_tokens=100, speculation=False), 4)
        outs = await collect(streams)
        assert [bytes(o).decode() for o in outs] == [REPLY] * 4
        # The prompt went through the model once; the other three re-read only its last token.
        assert engine.runtime.decoded_tokens < len(p) + 4 * (len(REPLY) + 1)
        assert [s.stats.cached_tokens for s in streams[1:]] == [len(p) - 1] * 3
        # All four advanced in the same steps: about one step per token, not four.
        assert engine.steps <= len(REPLY) + 3
    finally:
        engine.close()


async def test_candidates_sample_with_their_own_seeds_and_repeat_with_the_same_seed():
    engine = make(confidence=6.0)  # the scripted byte gets ~60% of the mass: samples stray
    try:
        p = prompt(engine)
        request = GenerateRequest(prompt=p, max_tokens=40, sampling=SamplingParams(temperature=1.0, seed=11))
        first = await collect(engine.generate_many(request, 4))
        request = GenerateRequest(prompt=p, max_tokens=40, sampling=SamplingParams(temperature=1.0, seed=11))
        again = await collect(engine.generate_many(request, 4))
        assert len({bytes(o) for o in first}) > 1  # different seeds, different candidates
        assert again == first  # the same seeds give the same candidates
        # Candidate 0 is what a single request with the same seed gives.
        single = engine.generate(
            GenerateRequest(prompt=p, max_tokens=40, sampling=SamplingParams(temperature=1.0, seed=11))
        )
        assert (await collect([single]))[0] == first[0]
    finally:
        engine.close()


async def test_cancelling_one_candidate_leaves_the_others_running():
    engine = fake_engine(lambda conv: "z" * 400, step_s=0.001)
    try:
        streams = engine.generate_many(GenerateRequest(prompt=prompt(engine), max_tokens=300), 3)
        streams[1].cancel()
        outs = await collect(streams)
        assert [len(o) for o in outs][::2] == [300, 300]
        assert len(outs[1]) < 300 and streams[1].stats.finish_reason == "cancelled"
    finally:
        engine.close()


async def test_more_candidates_than_sequences_is_refused():
    engine = make(n_seq_max=4)
    try:
        with pytest.raises(ValueError, match="between 1 and 4"):
            engine.generate_many(GenerateRequest(prompt=prompt(engine)), 5)
    finally:
        engine.close()


async def test_candidates_wait_for_sequences_held_by_other_sessions():
    engine = fake_engine(lambda conv: "w" * 60, step_s=0.001, n_seq_max=4)
    try:
        template = ChatTemplate(engine.tokenizer)
        others = [template.encode([Message("user", f"other {i}")]) for i in range(2)]
        busy = [engine.generate(GenerateRequest(prompt=p, max_tokens=50)) for p in others]
        streams = engine.generate_many(GenerateRequest(prompt=prompt(engine), max_tokens=50), 4)
        outs = await collect(busy + streams)
        assert all(len(o) == 50 for o in outs)
    finally:
        engine.close()


async def test_when_the_first_candidate_is_cancelled_at_once_another_prefills_for_the_rest():
    engine = make()
    try:
        p = prompt(engine)
        streams = engine.generate_many(GenerateRequest(prompt=p, max_tokens=100, speculation=False), 3)
        streams[0].cancel()
        outs = await collect(streams)
        assert outs[0] == [] and streams[0].stats.finish_reason == "cancelled"
        assert [bytes(o).decode() for o in outs[1:]] == [REPLY] * 2
        assert engine.runtime.decoded_tokens < len(p) + 3 * (len(REPLY) + 1)  # prefilled once
    finally:
        engine.close()
