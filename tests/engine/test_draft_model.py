"""The draft-model drafter on fake runtimes: same output as plain decoding, fewer steps, a KV
cache that stays in step with what the big model accepted."""

from __future__ import annotations

import random

import pytest

from whiz.chat.messages import Message
from whiz.chat.template import ChatTemplate
from whiz.engine.draft_model import DraftModel, check_compatible
from whiz.engine.fake import FakeRuntime, fake_engine
from whiz.engine.types import GenerateRequest
from whiz.errors import EngineError

# Free-form text: every byte once, so prompt lookup finds nothing to copy and only the draft
# model can guess ahead.
_rng = random.Random(7)
REPLY = "".join(_rng.sample([chr(c) for c in range(0x21, 0x7F)], 0x7F - 0x21))


def reply_script(conversation: str) -> str:
    return REPLY if "again" not in conversation else REPLY[::-1]


@pytest.fixture
def engine():
    e = fake_engine(reply_script, step_s=0.0, token_s=0.0, draft_miss_every=6)
    yield e
    e.close()


def prompt(engine, text: str) -> list[int]:
    return ChatTemplate(engine.tokenizer).encode([Message("user", text)])


async def run(engine, tokens, **kw):
    stream = engine.generate(GenerateRequest(prompt=tokens, max_tokens=500, **kw))
    out = [t async for c in stream for t in c.tokens]
    return out, stream.stats


def draft_kv_in_step(engine) -> bool:
    model = engine.draft_model
    return all(model.runtime._tokens(seq) == tokens for seq, tokens in enumerate(model.tokens))


async def test_draft_model_output_is_plain_output_in_fewer_steps(engine):
    p = prompt(engine, "write something new " * 10)  # longer than one catch-up chunk
    plain, s_plain = await run(engine, p, speculation=False)
    steps_plain = engine.steps
    drafted, s_draft = await run(engine, p, session="d")
    assert bytes(plain).decode() == REPLY
    assert drafted == plain
    # The small model is right 5 times in 6: most of its guesses are kept, its misses rejected.
    assert s_draft.draft_accepted > len(plain) / 2
    assert s_draft.draft_rejected > 0
    assert engine.steps - steps_plain < steps_plain / 2
    assert engine.draft_model.drafted_tokens >= s_draft.draft_accepted + s_draft.draft_rejected
    assert draft_kv_in_step(engine)


async def test_draft_cache_follows_the_session_into_the_next_turn(engine):
    first = prompt(engine, "hello")
    out, _ = await run(engine, first, session="s")
    follow = (
        first
        + out
        + engine.tokenizer.encode("<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n")
    )
    drafted_before = engine.draft_model.drafted_tokens
    again, stats = await run(engine, follow, session="s")
    plain, _ = await run(engine, follow, speculation=False)
    assert again == plain and bytes(again).decode() == REPLY[::-1]
    assert stats.draft_accepted > 0
    assert engine.draft_model.drafted_tokens > drafted_before
    assert draft_kv_in_step(engine)


async def test_candidates_share_the_draft_model_and_all_match_plain(engine):
    p = prompt(engine, "three at once")
    plain, _ = await run(engine, p, speculation=False)
    streams = engine.generate_many(GenerateRequest(prompt=p, max_tokens=500), 3)
    outs = [[t async for c in s for t in c.tokens] for s in streams]
    assert outs == [plain] * 3
    assert all(s.stats.draft_accepted > 0 for s in streams)
    assert draft_kv_in_step(engine)


def test_a_draft_model_with_another_tokenizer_is_refused():
    target, other = FakeRuntime(), FakeRuntime()
    check_compatible(target, other)
    other.n_vocab = 300
    with pytest.raises(EngineError, match="vocabulary"):
        check_compatible(target, other)


def test_a_draft_longer_than_the_draft_models_window_is_not_attempted():
    model = DraftModel(FakeRuntime(n_ctx=256, n_seq_max=2))
    assert model.max_context == 128
    assert model.propose(0, list(range(120)), 16) == []
    assert model.runtime.used_cells() == 0
