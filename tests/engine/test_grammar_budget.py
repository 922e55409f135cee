"""Matching a grammar has a budget per token: past it that request ends with an error that names
the bound (never with output that only looks constrained), so that one request's grammar never
stalls the engine thread every client shares."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import numpy as np
import pytest

from whiz.chat.messages import Message, Tool
from whiz.chat.template import ChatTemplate
from whiz.chat.toolgrammar import tool_call_grammar
from whiz.engine.fake import ByteTokenizer, fake_engine
from whiz.engine.gbnf import Gbnf, GbnfMatcher
from whiz.engine.grammar import AVERAGE_WINDOW, MATCH_BUDGET_MS, Constraint
from whiz.engine.grammar_thread import GrammarTooSlow
from whiz.engine.speculative import verify
from whiz.engine.types import GenerateRequest, SamplingParams

READ = Tool(
    "read_file", "", {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
)
GRAMMAR = tool_call_grammar([READ], required=True)
CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'


class CostlyMatcher:
    """A real matcher that also costs `ms_per_id` of CPU for each candidate it checks (the cost of
    an ambiguous grammar: a stack per reading, each checked against each candidate). It spends
    that CPU time on its thread, as a real matcher does, so what it is charged does not grow with
    the machine's load, while the engine thread it holds is really held."""

    def __init__(self, inner: GbnfMatcher, ms_per_id: float, accept_ms: float = 0.0):
        self.inner = inner
        self.ms_per_id = ms_per_id
        self.accept_ms = accept_ms
        self.spent_ms: list[float] = []

    def _cost(self, ms: float) -> None:
        self.spent_ms.append(ms)
        until = time.thread_time() + ms / 1000
        while time.thread_time() < until:
            pass

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        self._cost(self.ms_per_id * len(ids))
        return self.inner.allowed(ids)

    def accept(self, token: int) -> None:
        self._cost(self.accept_ms)
        self.inner.accept(token)

    def can_end(self) -> bool:
        return self.inner.can_end()


def costly(tokenizer, ms_per_id: float, accept_ms: float = 0.0, made: list | None = None):
    def factory(gbnf: str, root: str) -> CostlyMatcher:
        matcher = CostlyMatcher(GbnfMatcher(Gbnf(gbnf, root), tokenizer), ms_per_id, accept_ms)
        if made is not None:
            made.append(matcher)
        return matcher

    return factory


def prose_logits(tokenizer: ByteTokenizer) -> np.ndarray:
    """The model wants to chat where the grammar wants a call: its best tokens are all forbidden."""
    logits = np.zeros(tokenizer.n_vocab, dtype=np.float32)
    logits[[ord(c) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"]] = 5.0
    logits[ord("H")] = 9.0
    return logits


def test_a_grammar_too_costly_to_match_ends_its_request_within_the_budget():
    tok = ByteTokenizer()
    made: list[CostlyMatcher] = []
    notes: dict[str, str] = {}
    c = Constraint(GRAMMAR, tok, costly(tok, ms_per_id=2.0, made=made), notes=notes)
    # Checking the whole vocabulary would have cost ~0.5 s: the request ends before it, with an
    # error that names the bound, not with output that only looks constrained.
    with pytest.raises(GrammarTooSlow, match="for one token would take more than 200 ms"):
        c.pick(prose_logits(tok), SamplingParams(), np.random.default_rng(0))
    assert c.dropped and c.dropped.startswith("dropped: ") and notes == {"grammar": c.dropped}
    assert sum(made[0].spent_ms) <= MATCH_BUDGET_MS
    assert c.ended and not c.matching


def test_sampling_over_the_whole_vocabulary_is_bounded_too():
    tok = ByteTokenizer()
    made: list[CostlyMatcher] = []
    c = Constraint(GRAMMAR, tok, costly(tok, ms_per_id=2.0, made=made))
    with pytest.raises(GrammarTooSlow):
        c.pick(prose_logits(tok), SamplingParams(temperature=1.0), np.random.default_rng(0))
    assert c.dropped and sum(made[0].spent_ms) <= MATCH_BUDGET_MS


def test_a_token_that_took_too_long_to_accept_ends_the_request():
    tok = ByteTokenizer()
    c = Constraint(GRAMMAR, tok, costly(tok, ms_per_id=0.0, accept_ms=MATCH_BUDGET_MS * 1.5))
    logits = prose_logits(tok)
    logits[ord("<")] = 1.0
    token = c.pick(logits, SamplingParams(), np.random.default_rng(0))
    assert token == ord("<") and c.dropped is None  # the grammar's choice: the call's tag
    with pytest.raises(GrammarTooSlow, match="took more than"):
        c.accept(token)
    assert c.dropped is not None and "took more than" in c.dropped


def test_a_cheap_grammar_is_kept_and_followed():
    tok = ByteTokenizer()
    c = Constraint(GRAMMAR, tok, costly(tok, ms_per_id=0.01))
    rng = np.random.default_rng(0)
    out: list[int] = []
    for ch in CALL:
        logits = prose_logits(tok)
        logits[ord(ch)] = 20.0
        token = c.pick(logits, SamplingParams(), rng)
        c.accept(token)
        out.append(token)
    assert c.dropped is None and bytes(out).decode() == CALL


class DescheduledMatcher(CostlyMatcher):
    """Cheap to match, but its thread is held up for `wall_ms` at each token, as on a machine whose
    cores other processes (or other threads, holding the GIL) keep busy."""

    def __init__(self, inner: GbnfMatcher, wall_ms: float):
        super().__init__(inner, ms_per_id=0.0)
        self.wall_ms = wall_ms

    def accept(self, token: int) -> None:
        time.sleep(self.wall_ms / 1000)
        super().accept(token)


def test_a_busy_machine_does_not_make_a_cheap_grammar_look_costly():
    tok = ByteTokenizer()

    # Each token's matching waits 1.5x the average a grammar may cost, but costs next to nothing.
    def held_up(gbnf: str, root: str) -> DescheduledMatcher:
        return DescheduledMatcher(GbnfMatcher(Gbnf(gbnf, root), tok), wall_ms=MATCH_BUDGET_MS / 3)

    c = Constraint(GRAMMAR, tok, held_up)
    rng = np.random.default_rng(0)
    out: list[int] = []
    for ch in CALL[: AVERAGE_WINDOW + 4]:
        logits = prose_logits(tok)
        logits[ord(ch)] = 20.0
        token = c.pick(logits, SamplingParams(), rng)
        c.accept(token)
        out.append(token)
    assert c.dropped is None and bytes(out).decode() == CALL[: AVERAGE_WINDOW + 4]


def test_the_matcher_is_built_on_the_engine_thread_not_where_the_request_is_queued():
    tok = ByteTokenizer()
    made: list[CostlyMatcher] = []
    c = Constraint(GRAMMAR, tok, costly(tok, ms_per_id=0.0, made=made))
    assert made == []  # a grammar that takes long to read must not hold the event loop
    c.pick(prose_logits(tok), SamplingParams(), np.random.default_rng(0))
    assert len(made) == 1


async def test_a_request_over_its_grammar_budget_ends_with_an_error_and_the_other_goes_on():
    engine = fake_engine(lambda conv: "Hello there, nothing to call." * 3, step_s=0.0, token_s=0.0)
    # Only the budget (CPU time) decides here: the deadline (wall time) could come first on a
    # loaded machine, where the costly matcher's CPU time is spread over more wall time.
    engine.grammar_thread.deadline_ms = 60_000.0
    # The fake model's other tokens tie at 0, so the first candidates checked include allowed ones:
    # costly enough that checking those alone passes the budget.
    engine.runtime.grammar = costly(engine.tokenizer, ms_per_id=10.0)
    try:
        prompt = ChatTemplate(engine.tokenizer).encode([Message("user", "hi")], [READ])
        costly_one = engine.generate(GenerateRequest(prompt, max_tokens=40, grammar=GRAMMAR))
        plain = engine.generate(GenerateRequest(prompt, max_tokens=40))

        async def run(stream) -> str:
            return bytes(t for chunk in [c async for c in stream] for t in chunk.tokens).decode()

        constrained, free = await asyncio.gather(run(costly_one), run(plain))
        assert free == ("Hello there, nothing to call." * 3)[:40]
        assert costly_one.stats.finish_reason == "error" and len(constrained) < 40
        assert "would take more than 200 ms" in costly_one.stats.error
        assert costly_one.stats.notes["grammar"].startswith("dropped: ")
        assert "grammar" not in plain.stats.notes and plain.stats.error is None
    finally:
        engine.close()


def test_a_draft_under_a_costly_grammar_is_verified_a_budget_at_a_time():
    # A step verifies a draft row by row, a match per row: 32 rows of a grammar just under the
    # per-token budget would hold the engine for 32 budgets. Past one budget the step ends there.
    tok = ByteTokenizer()
    c = Constraint(GRAMMAR, tok, costly(tok, ms_per_id=0.0, accept_ms=MATCH_BUDGET_MS / 3))
    call = list(CALL.encode())
    draft = call[:12]
    rows = []
    for ch in call[:13]:
        row = np.zeros(tok.n_vocab, dtype=np.float32)
        row[ch] = 10.0
        rows.append(row)
    verdict = verify(draft, rows, SamplingParams(), np.random.default_rng(0), c)
    assert 2 <= len(verdict.tokens) < len(draft)
    assert verdict.tokens == draft[: len(verdict.tokens)] and verdict.accepted == len(verdict.tokens) - 1
    assert c.dropped is None  # each token was within its budget: the grammar is kept


def test_a_grammar_that_costs_just_under_the_budget_on_every_token_is_dropped_too():
    tok = ByteTokenizer()
    notes: dict[str, str] = {}
    # ~64 ms a token (32 candidates at 2 ms): under the 200 ms budget, over a quarter of it.
    c = Constraint(GRAMMAR, tok, costly(tok, ms_per_id=2.0), notes=notes)
    rng = np.random.default_rng(0)
    written = 0
    with pytest.raises(GrammarTooSlow, match="per token over 16 tokens"):
        for ch in CALL:
            logits = prose_logits(tok)
            logits[ord(ch)] = 20.0
            token = c.pick(logits, SamplingParams(), rng)
            written += 1
            c.accept(token)
    assert written == AVERAGE_WINDOW and "per token over 16 tokens" in notes["grammar"]


class SlowCollections:
    """The garbage collections a `CollectingMatcher` sets off cost `ms` of CPU on its thread: what
    a full collection of a large heap costs (hundreds of ms for millions of objects), without
    building one. Other collections (the test process's own, on any thread) cost what they do."""

    def __init__(self, ms: float):
        self.ms = ms
        self.asked = threading.local()

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start" and getattr(self.asked, "now", False):
            until = time.thread_time() + self.ms / 1000
            while time.thread_time() < until:
                pass

    def collect(self) -> None:
        self.asked.now = True
        try:
            gc.collect(0)
        finally:
            self.asked.now = False


class CollectingMatcher(CostlyMatcher):
    """Cheap to match, but its first `slow` accepts each set off a slow garbage collection on its
    thread, as allocating does on the engine thread of a server whose heap has grown."""

    def __init__(self, inner: GbnfMatcher, collections: SlowCollections, slow: int = 3):
        super().__init__(inner, ms_per_id=0.0)
        self.collections, self.slow = collections, slow

    def accept(self, token: int) -> None:
        if self.slow > 0:
            self.slow -= 1
            self.collections.collect()
        super().accept(token)


async def test_a_garbage_collection_during_matching_is_not_charged_to_the_grammar():
    engine = fake_engine(lambda conv: CALL, step_s=0.0, token_s=0.0)
    engine.grammar_thread.deadline_ms = 60_000.0  # the budget decides, not the (wall) deadline
    tok = engine.tokenizer
    slow = SlowCollections(MATCH_BUDGET_MS * 1.5)

    def collecting(gbnf: str, root: str) -> CollectingMatcher:
        return CollectingMatcher(GbnfMatcher(Gbnf(gbnf, root), tok), slow)

    engine.runtime.grammar = collecting
    gc.callbacks.append(slow)
    try:
        prompt = ChatTemplate(tok).encode([Message("user", "read a.py")], [READ])
        stream = engine.generate(GenerateRequest(prompt, max_tokens=len(CALL), grammar=GRAMMAR))
        text = bytes(t for chunk in [c async for c in stream] for t in chunk.tokens).decode()
        assert text == CALL and "grammar" not in stream.stats.notes

        # The plain CPU clock (collections not taken out) charges the collection and drops it.
        plain = Constraint(GRAMMAR, tok, collecting, clock=time.thread_time)
        logits = prose_logits(tok)
        logits[ord("<")] = 20.0
        with pytest.raises(GrammarTooSlow):
            plain.accept(plain.pick(logits, SamplingParams(), np.random.default_rng(0)))
        assert plain.dropped is not None and "took more than" in plain.dropped
    finally:
        gc.callbacks.remove(slow)
        engine.close()
    assert engine.matching_clock._on_gc not in gc.callbacks  # a closed engine leaves no hook
