"""No request makes another wait long: while several requests share the engine, each step holds
only the rows its cost model says fit the step budget, whatever one request brings (a long prompt,
drafts from a prediction that never matches, many requests at once), and a plain stream gets a
token from every step. Counted in rows and steps, never in seconds."""

from __future__ import annotations

from whiz.chat.messages import Message
from whiz.chat.template import ChatTemplate
from whiz.engine.fake import fake_engine
from whiz.engine.speculative import BatchCost
from whiz.engine.step_budget import StepBudget
from whiz.engine.types import GenerateRequest

PLAIN = "plain words that stream at their own pace " * 6
ROW_MS = {1: 10.0, 33: 330.0}
"""A machine where each row costs 10 ms (a 2-core AVX2 CPU's figure): 40 rows fit 400 ms."""
FIT = 40


def test_the_rows_that_fit_follow_the_cost_model_and_a_slower_machine():
    budget = StepBudget(BatchCost(ROW_MS), step_ms=400.0)
    assert budget.rows() == FIT
    budget.observed(FIT, 1600.0)  # the machine got four times slower than at start
    assert budget.rows() < FIT * 0.6
    for _ in range(20):
        budget.observed(10, 1.0)  # and quiet again: never more rows than the start-up timings fit
    assert budget.rows() == FIT
    assert StepBudget(BatchCost(ROW_MS), step_ms=1.0).rows() == 1  # every step still moves


def script(conversation: str) -> str:
    return PLAIN


class Recorder:
    """Wraps the runtime's decode: each step's rows per sequence."""

    def __init__(self, runtime):
        self.steps: list[dict[int, int]] = []
        inner = runtime.decode

        def decode(rows):
            per_seq: dict[int, int] = {}
            for _, _, seq, _ in rows:
                per_seq[seq] = per_seq.get(seq, 0) + 1
            self.steps.append(per_seq)
            return inner(rows)

        runtime.decode = decode


async def _beside(long_prompt_tokens: int, step_ms: float, *, predictions: int = 0):
    """A plain stream decoding, then a request with a long prompt (and `predictions` more requests
    whose predicted output never matches); returns the recorder, the plain stream's slot and the
    steps that ran while the long prompt was prefilled."""
    engine = fake_engine(script, step_s=0.0, token_s=0.0, n_seq_max=2 + predictions)
    engine.step_budget = StepBudget(BatchCost(ROW_MS), step_ms=step_ms)
    recorder = Recorder(engine.runtime)
    template = ChatTemplate(engine.tokenizer)
    try:
        hi = template.encode([Message("user", "hi")])
        # A token a step (no drafts), so that it streams through the whole long prefill.
        plain = engine.generate(GenerateRequest(hi, max_tokens=len(PLAIN), speculation=False))
        chunks = aiter(plain)
        await anext(chunks)  # the plain stream is decoding
        long_prompt = template.encode([Message("user", "x" * long_prompt_tokens)])
        others = [engine.generate(GenerateRequest(long_prompt, max_tokens=4))]
        wrong = engine.tokenizer.encode("nothing like what is written " * 40)
        for _ in range(predictions):
            ask = template.encode([Message("user", "hi")])
            others.append(engine.generate(GenerateRequest(ask, max_tokens=len(PLAIN), prediction=wrong)))
        async for _ in chunks:
            pass
        for stream in others:
            async for _ in stream:
                pass
        plain_seq = next(iter(recorder.steps[0]))
        totals: dict[int, int] = {}
        for step in recorder.steps:
            for q, n in step.items():
                totals[q] = totals.get(q, 0) + n
        long_seq = max(totals, key=totals.__getitem__)  # the long prompt's
        long_at = [i for i, s in enumerate(recorder.steps) if s.get(long_seq, 0) > 1]
        assert max(long_at) < max(i for i, s in enumerate(recorder.steps) if plain_seq in s)
        long_steps = [recorder.steps[i] for i in long_at]
        return recorder, plain_seq, long_steps
    finally:
        engine.close()


async def test_a_long_prompt_is_prefilled_a_budget_at_a_time_beside_a_stream():
    recorder, plain_seq, steps = await _beside(2000, step_ms=400.0)
    assert steps and all(sum(step.values()) <= FIT for step in steps)
    # The plain stream had its row in every step that prefilled the long prompt: a token each.
    assert all(plain_seq in step for step in steps)
    # Twice the prompt: twice the steps, each no larger.
    _, _, twice = await _beside(4000, step_ms=400.0)
    assert all(sum(step.values()) <= FIT for step in twice)
    assert 1.7 * len(steps) <= len(twice) <= 2.3 * len(steps)


async def test_without_the_budget_one_step_would_hold_the_stream_for_a_whole_chunk():
    # The bound is what keeps steps small: with room for any batch, the prompt goes in by chunks
    # of 256 rows, each of which the plain stream's next token waits for.
    _, _, steps = await _beside(2000, step_ms=1e9)
    assert max(sum(step.values()) for step in steps) > 6 * FIT


async def test_drafts_that_never_match_share_the_budget_too():
    recorder, _, _ = await _beside(2000, step_ms=400.0, predictions=3)
    shared = [s for s in recorder.steps if len(s) > 1]
    assert shared and all(sum(step.values()) <= FIT for step in shared)
    assert any(max(step.values()) > 1 for step in shared)  # drafts were verified, within it


async def test_an_engine_alone_fills_its_batches():
    # Nobody waits on a lone request's steps: its prompt goes in by whole batches.
    engine = fake_engine(script, step_s=0.0, token_s=0.0)
    engine.step_budget = StepBudget(BatchCost(ROW_MS))
    recorder = Recorder(engine.runtime)
    try:
        prompt = ChatTemplate(engine.tokenizer).encode([Message("user", "x" * 2000)])
        async for _ in engine.generate(GenerateRequest(prompt, max_tokens=2)):
            pass
    finally:
        engine.close()
    assert max(sum(step.values()) for step in recorder.steps) == 512


async def test_one_requests_candidates_alone_keep_their_long_drafts():
    # Candidates of one request wait only for each other: their drafts are not cut to the budget.
    engine = fake_engine(script, step_s=0.0, token_s=0.0)
    engine.step_budget = StepBudget(BatchCost(ROW_MS), step_ms=400.0)
    recorder = Recorder(engine.runtime)
    try:
        prompt = ChatTemplate(engine.tokenizer).encode([Message("user", "hi")])
        prediction = engine.tokenizer.encode(PLAIN)
        request = GenerateRequest(prompt, max_tokens=len(PLAIN), prediction=prediction)
        for stream in engine.generate_many(request, 3):
            async for _ in stream:
                pass
    finally:
        engine.close()
    assert max(sum(step.values()) for step in recorder.steps if len(step) == 3) > FIT
