"""Many grammar-constrained requests, each within its own caps, do not together stall the other
streams: matching gets a share of the engine's time, grammar jobs past it wait a step, and their
replies say how long they waited."""

from __future__ import annotations

import asyncio

from tests.engine.test_grammar_budget import CALL, GRAMMAR, READ, costly
from whiz.chat.messages import Message
from whiz.chat.template import ChatTemplate
from whiz.engine.fake import fake_engine, last_user_message
from whiz.engine.grammar_share import STEP_MS, GrammarShare, matching
from whiz.engine.types import GenerateRequest

ATTACKERS = 10
ACCEPT_MS = 20.0  # well under the 50 ms average a grammar may cost per token: each one is legal
PLAIN = "plain words that stream at their own pace " * 4


def script(conversation: str) -> str:
    return CALL if last_user_message(conversation) == "call" else PLAIN


def matching_per_shared_step(share: GrammarShare) -> list[int]:
    """Records, for each engine step a stream without a grammar shares, how many grammar jobs
    match a token in it: what that step waits for."""
    counts: list[int] = []
    held = share.held

    def counting(candidates, everyone):
        candidates, everyone = list(candidates), list(everyone)
        waiting = held(candidates, everyone)
        if not all(matching(job) for job in everyone):
            counts.append(sum(1 for job in candidates if matching(job)) - len(waiting))
        return waiting

    share.held = counting
    return counts


async def _plain_steps(share: bool) -> tuple[list[int], list]:
    engine = fake_engine(script, step_s=0.002, token_s=0.0, n_seq_max=ATTACKERS + 2)
    engine.runtime.grammar = costly(engine.tokenizer, ms_per_id=0.0, accept_ms=ACCEPT_MS)
    if not share:
        engine.grammar_share = GrammarShare(share=0.999999, step_ms=1e9)  # as before: no bound
    counts = matching_per_shared_step(engine.grammar_share)
    template = ChatTemplate(engine.tokenizer)
    try:
        attack = template.encode([Message("user", "call")], [READ])
        attackers = [
            engine.generate(GenerateRequest(attack, max_tokens=20, grammar=GRAMMAR)) for _ in range(ATTACKERS)
        ]
        await asyncio.sleep(0.5)  # the attackers are matching their grammar
        plain = engine.generate(GenerateRequest(template.encode([Message("user", "hi")]), max_tokens=60))
        text = bytes(t for chunk in [c async for c in plain] for t in chunk.tokens).decode()
        assert text == PLAIN[:60]
        for stream in attackers:  # what they write is still the call, under the grammar
            written = bytes(t for chunk in [c async for c in stream] for t in chunk.tokens)
            assert written.decode() == CALL[:20]
        return counts, [s.stats for s in attackers]
    finally:
        engine.close()


async def test_a_plain_stream_keeps_its_pace_beside_many_grammar_requests():
    # A plain stream's step waits for the grammar matching in it: counted, not timed.
    bounded, attackers = await _plain_steps(share=True)
    unbounded, _ = await _plain_steps(share=False)
    # Shared, a step holds at most what fits the most credit (50 ms: two of these tokens).
    fits = STEP_MS // ACCEPT_MS
    assert max(bounded) <= fits, bounded
    # Unbounded, a step waits for every attacker still matching (up to 10 x 20 ms).
    assert max(unbounded) > 2 * fits, unbounded
    # Every attacker moved on, and the ones that waited are told so.
    assert all(s.decode_tokens == 20 and "grammar" not in s.notes for s in attackers)
    told = [s.notes["grammar_wait"] for s in attackers if "grammar_wait" in s.notes]
    assert told and all("for grammar time" in note for note in told)


async def test_grammar_requests_alone_are_not_held_back():
    engine = fake_engine(script, step_s=0.002, token_s=0.0)
    engine.runtime.grammar = costly(engine.tokenizer, ms_per_id=0.0, accept_ms=5.0)
    try:
        attack = ChatTemplate(engine.tokenizer).encode([Message("user", "call")], [READ])
        streams = [
            engine.generate(GenerateRequest(attack, max_tokens=len(CALL), grammar=GRAMMAR)) for _ in range(3)
        ]

        async def text(stream) -> str:
            return bytes(t for chunk in [c async for c in stream] for t in chunk.tokens).decode()

        assert await asyncio.gather(*(text(s) for s in streams)) == [CALL] * 3
        assert engine.grammar_share.held_steps == 0
        assert all("grammar_wait" not in s.stats.notes for s in streams)
    finally:
        engine.close()
