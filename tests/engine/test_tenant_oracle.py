"""One tenant's prompt is not another's cache, in the engine: everything key B can observe of its
own requests (cached tokens, tokens prefilled, tokens restored from disk, and the work the engine
did for it, which is what its timings measure) is the same whether or not key A sent a secret
that B's guesses begin like. B's first request included, through every way the engine reuses a
cache: the live slots, a session named like A's, chunks that only moved, A's request still
running beside B's, and the prefix cache on disk after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from whiz.chat.messages import Message
from whiz.chat.template import ChatTemplate
from whiz.engine.fake import fake_engine
from whiz.engine.prefix_cache import PrefixCache
from whiz.engine.types import GenerateRequest

TEMPLATE = "You are the support bot of one shop. Answer in one line. " * 6
SECRET = "My card number is 4417 2290 1188 3305 and my PIN is 9931, keep them safe. " * 8
WRONG = "My card number is 5500 0000 0000 0004 and my PIN is 1234, keep them safe. " * 8
GUESSES = [SECRET, SECRET[:90] + " please", WRONG, SECRET[:40]]
"""B's guesses, the right one first: its very first request must learn nothing either."""


def prompt(engine, user: str) -> list[int]:
    return ChatTemplate(engine.tokenizer).encode([Message("system", TEMPLATE), Message("user", user)])


async def ask(engine, user: str, tenant: str, max_tokens_: int = 8, **kw) -> tuple[int, int]:
    request = GenerateRequest(prompt=prompt(engine, user), max_tokens=max_tokens_, tenant=tenant, **kw)
    stream = engine.generate(request)
    _ = [t async for chunk in stream for t in chunk.tokens]
    return stream.stats.cached_tokens, stream.stats.prefill_tokens


def work(engine) -> tuple[int, int, int, int]:
    """What the fake model computed: a cache hit is a token it did not decode."""
    r = engine.runtime
    return r.decoded_tokens, r.decode_calls, r.restored_tokens, r.shifted_tokens


async def b_sees(engine, **kw) -> list:
    """B's guesses: what each reported, and the work each cost."""
    seen = []
    for guess in GUESSES:
        before = work(engine)
        stats = await ask(engine, guess, "key-b", **kw)
        seen.append((stats, tuple(a - b for a, b in zip(work(engine), before, strict=True))))
    return seen


WAYS = {
    "slots": {},
    "same session name": {"session": "chat-1"},
    "moved chunks": {"reuse_chunk": 8},
}


@pytest.mark.parametrize("way", WAYS)
async def test_b_learns_nothing_of_as_prompt_from_the_live_cache(way):
    async def world(a_speaks: bool) -> list:
        engine = fake_engine()
        try:
            if a_speaks:
                await ask(engine, SECRET, "key-a", **WAYS[way])
            return await b_sees(engine, **WAYS[way])
        finally:
            engine.close()

    alone = await world(a_speaks=False)
    assert await world(a_speaks=True) == alone
    assert alone[1][0][0] > len(TEMPLATE)  # B still shares its own prefixes: the test can tell


async def test_b_learns_nothing_while_as_request_still_runs():
    async def world(a_speaks: bool) -> list:
        engine = fake_engine(script=lambda conversation: "z" * 4000)  # A answers for 4,000 steps
        try:
            running = None
            if a_speaks:  # A's prompt is in and A is still answering when B asks
                request = GenerateRequest(prompt=prompt(engine, SECRET), max_tokens=4000, tenant="key-a")
                running = engine.generate(request)
                await running.__aiter__().__anext__()
            # What B is told, prefill_tokens being B's own work (the engine's counters count A's too).
            seen = [await ask(engine, guess, "key-b") for guess in GUESSES]
            if running is not None:
                assert running.stats.finish_reason is None  # still running: the test can tell
                running.cancel()
            return seen
        finally:
            engine.close()

    assert await world(a_speaks=True) == await world(a_speaks=False)


async def test_b_learns_nothing_of_as_prompt_from_the_disk_after_a_restart(tmp_path: Path):
    def engine_over(folder: Path):
        return fake_engine(prefix_cache=PrefixCache(folder, {"model": "fake"}, min_tokens=128))

    async def world(folder: Path, a_speaks: bool) -> list:
        if a_speaks:
            first = engine_over(folder)
            try:
                await ask(first, SECRET, "key-a")
            finally:
                first.close()
            assert list(folder.iterdir())  # A's prompt is on disk: the test can tell
        engine = engine_over(folder)
        try:
            return await b_sees(engine)
        finally:
            engine.close()

    assert await world(tmp_path / "a", True) == await world(tmp_path / "none", False)


async def test_b_learns_nothing_of_as_prompt_from_the_draft_models_cache():
    """The draft model keeps a cache per slot too: what it drafts for B, and what that costs it,
    must not depend on what A left there."""

    async def world(a_speaks: bool) -> list:
        engine = fake_engine(draft_miss_every=6, step_s=0.0, token_s=0.0)
        draft = engine.draft_model
        try:
            if a_speaks:
                await ask(engine, SECRET, "key-a", max_tokens_=40)
            seen = []
            for guess in GUESSES:
                before = (draft.runtime.decoded_tokens, draft.drafted_tokens)
                stream = engine.generate(
                    GenerateRequest(prompt=prompt(engine, guess), max_tokens=40, tenant="key-b")
                )
                _ = [t async for chunk in stream for t in chunk.tokens]
                s = stream.stats
                after = (draft.runtime.decoded_tokens, draft.drafted_tokens)
                seen.append(
                    (
                        s.cached_tokens,
                        s.draft_accepted,
                        s.draft_rejected,
                        after[0] - before[0],
                        after[1] - before[1],
                    )
                )
            return seen
        finally:
            engine.close()

    alone = await world(a_speaks=False)
    assert await world(a_speaks=True) == alone
    assert any(s[1] for s in alone)  # the draft model drafted for B: the test can tell


def test_a_reply_remembered_for_one_tenant_is_tokenized_afresh_for_another():
    """A resent reply reuses the tokens it was sampled as, which can differ from how the text
    tokenizes: another key's history with the same text must not get them (its prompt's length
    would tell the text was someone's reply)."""
    engine = fake_engine()
    try:
        template = ChatTemplate(engine.tokenizer)
        reply = "Your PIN is 9931."
        sampled = [ord(c) for c in reply][:-1] + [999]  # not how the text tokenizes
        template.remember(reply, sampled, tenant="key-a")
        history = [Message("user", "What is my PIN?"), Message("assistant", reply)]
        fresh = ChatTemplate(engine.tokenizer).encode_turns(history)
        assert template.encode_turns(history, tenant="key-b") == fresh
        assert template.encode_turns(history) == fresh
        assert template.encode_turns(history, tenant="key-a") != fresh  # A's own still reuse them
    finally:
        engine.close()
