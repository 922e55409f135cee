"""Speculation changes speed, never output: identity, rollback, the sampling rule, adaptivity."""

from __future__ import annotations

import numpy as np
import pytest

from whiz.chat.messages import Message
from whiz.chat.template import ChatTemplate
from whiz.engine.fake import fake_engine, last_user_message
from whiz.engine.sampling import probabilities, sample
from whiz.engine.speculative import BatchCost, DraftLength, verify
from whiz.engine.types import GenerateRequest, SamplingParams

FILE = "\n".join(
    f"def handler_{i}(request):\n    return render(request, 'page_{i}.html')\n" for i in range(12)
)


def rename_script(conversation: str) -> str:
    """A fake model that rewrites the file it was given with one function renamed."""
    return last_user_message(conversation).replace("handler_5", "serve_five")


async def run(engine, prompt, **kw):
    stream = engine.generate(GenerateRequest(prompt=prompt, max_tokens=2000, **kw))
    tokens = [t async for c in stream for t in c.tokens]
    return tokens, stream.stats


@pytest.fixture
def engine():
    e = fake_engine(rename_script, step_s=0.0, token_s=0.0)
    yield e
    e.close()


def edit_prompt(engine):
    return ChatTemplate(engine.tokenizer).encode([Message("user", FILE)])


def kv_matches_slots(engine) -> bool:
    return all(engine.runtime._tokens(s.seq) == s.tokens for s in engine.slots.slots)


async def test_prediction_and_lookup_give_the_plain_output_in_fewer_steps(engine):
    prompt = edit_prompt(engine)
    plain, s_plain = await run(engine, prompt, speculation=False)
    steps_plain = engine.steps
    predicted, s_pred = await run(engine, prompt, prediction=engine.tokenizer.encode(FILE), session="p")
    steps_pred = engine.steps - steps_plain
    looked_up, s_look = await run(engine, prompt, session="l")
    assert bytes(plain).decode() == FILE.replace("handler_5", "serve_five")
    assert predicted == plain and looked_up == plain
    assert s_plain.draft_accepted == 0
    assert s_pred.draft_accepted > len(plain) * 0.8
    assert steps_pred < len(plain) / 4
    # Accepted drafts plus one model token per step make up the output.
    assert s_pred.draft_accepted <= s_pred.decode_tokens
    assert kv_matches_slots(engine)


async def test_rejected_drafts_are_rolled_back_and_the_next_turn_continues(engine):
    prompt = edit_prompt(engine)
    # A prediction that is wrong in many places forces rejections and rollbacks.
    wrong = FILE.replace("request", "req").replace("render", "draw")
    out, stats = await run(engine, prompt, prediction=engine.tokenizer.encode(wrong), session="s")
    assert stats.draft_rejected > 0
    assert kv_matches_slots(engine)
    follow = (
        prompt
        + out
        + engine.tokenizer.encode("<|im_end|>\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n")
    )
    again, stats2 = await run(engine, follow, session="s")
    assert bytes(again).decode() == "ok"
    assert stats2.cached_tokens >= len(prompt) + len(out)


async def test_speculation_can_be_switched_off_for_the_engine():
    engine = fake_engine(rename_script, step_s=0.0, token_s=0.0)
    engine.speculation = False
    try:
        _, stats = await run(engine, edit_prompt(engine), prediction=engine.tokenizer.encode(FILE))
        assert stats.draft_accepted == 0 and stats.draft_rejected == 0
    finally:
        engine.close()


def test_greedy_verification_keeps_the_agreeing_prefix():
    def row(best):
        r = np.zeros(10, dtype=np.float32)
        r[best] = 5
        return r

    v = verify([3, 4, 5], [row(3), row(4), row(9), row(1)], SamplingParams(), np.random.default_rng(0))
    assert v.accepted == 2 and v.tokens == [3, 4, 9]
    v = verify([3], [row(3), row(7)], SamplingParams(), np.random.default_rng(0))
    assert v.accepted == 1 and v.tokens == [3, 7]


def test_sampled_verification_preserves_the_model_distribution():
    rng = np.random.default_rng(0)
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    params = SamplingParams(temperature=1.0)
    target = probabilities(logits, params)
    counts = np.zeros(4)
    n = 20000
    for _ in range(n):
        v = verify([1], [logits, logits], params, rng)  # always draft token 1
        counts[v.tokens[0]] += 1
    assert np.abs(counts / n - target).max() < 0.015


def test_sampled_verification_draws_what_plain_sampling_draws_with_the_same_seed():
    # One random number per emitted token, in order: a seeded run repeats whatever the drafts.
    logits = [np.log(np.array([0.4, 0.3, 0.2, 0.1])) + k * 0.01 for k in range(6)]
    params = SamplingParams(temperature=1.0)
    for seed in range(50):
        plain_rng = np.random.default_rng(seed)
        plain = [sample(row, params, plain_rng) for row in logits]
        for draft in ([], plain[:3], [plain[0], (plain[1] + 1) % 4], [(plain[0] + 1) % 4]):
            rng, out = np.random.default_rng(seed), []
            while len(out) < len(logits):
                d = draft[len(out) :][: len(logits) - len(out) - 1]
                out += verify(d, logits[len(out) : len(out) + len(d) + 1], params, rng).tokens
            assert out == plain, (seed, draft)


def test_draft_length_follows_acceptance_and_batch_costs():
    cheap = BatchCost({1: 10.0, 64: 40.0})  # batches cost little more than one row
    d = DraftLength(cheap, max_len=32)
    for _ in range(5):
        d.update(8, 8)
    assert d.next() >= 16  # drafts keep hitting: draft long
    for _ in range(8):
        d.update(8, 0)
    assert d.next() <= 2  # drafts keep missing: short or off


def test_drafting_pauses_while_drafts_miss_too_often_to_pay_and_probes_now_and_then():
    cost = BatchCost({1: 10.0, 64: 199.0})  # an extra row costs 3 ms against 10 for a step
    d = DraftLength(cost, max_len=32, prior=0.2, pause_steps=4)
    assert not d.hopeless  # drafts that hit would pay
    assert [d.next() for _ in range(5)] == [0, 0, 0, 0, 2]  # paused, then one short probe


def test_batch_cost_interpolates():
    cost = BatchCost({1: 20.0, 17: 100.0})
    assert cost(1) == 20.0 and cost(9) == 60.0 and cost(33) == 180.0


def test_a_drafter_that_cannot_pay_even_when_always_right_never_drafts_or_probes():
    cost = BatchCost({1: 56.0, 4: 156.0, 16: 547.0})  # the 1.5B on a 2-core AVX2 machine
    draft_model = DraftLength(cost, max_len=32, prior=0.7, draft_token_ms=29.0)  # the 0.5B drafting
    assert draft_model.hopeless
    assert [draft_model.next() for _ in range(300)] == [0] * 300
    # Free drafts (prediction, lookup) on the same machine pay when they are right.
    assert not DraftLength(cost, max_len=32, prior=0.95).hopeless


async def test_sequences_decoding_together_verify_drafts_of_one_length(engine):
    # llama.cpp takes as many rows from each sequence per forward pass; a longer draft in one
    # sequence would cost the whole step an extra pass.
    import asyncio

    decoded: list[list[tuple[int, int, int, bool]]] = []
    real_decode = engine.runtime.decode

    def recording(rows):
        decoded.append(list(rows))
        return real_decode(rows)

    engine.runtime.decode = recording
    prompt = edit_prompt(engine)
    alone, _ = await run(engine, prompt, speculation=False)
    other = ChatTemplate(engine.tokenizer).encode([Message("user", FILE.replace("request", "req"))])
    (with_prediction, _), (without, _) = await asyncio.gather(
        run(engine, prompt, prediction=engine.tokenizer.encode(FILE), session="p"),
        run(engine, other, session="q"),
    )
    assert with_prediction == alone  # speculation still changes nothing
    shared = [rows for rows in decoded if len({r[2] for r in rows}) > 1 and all(r[3] for r in rows)]
    assert shared, "the two sessions never decoded in one batch"
    for rows in shared:
        per_seq = {seq: sum(1 for r in rows if r[2] == seq) for seq in {r[2] for r in rows}}
        assert len(set(per_seq.values())) == 1, per_seq
    assert any(len(rows) > 2 for rows in shared), "no step drafted while both decoded"
