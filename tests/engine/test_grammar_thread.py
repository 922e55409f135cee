"""A grammar matcher call that never comes back cannot stall the engine: calls run on the grammar
thread, the engine waits for each at most the deadline it enforces, and the request past it ends
with a clear error while a plain stream beside it gets a token from every step. Worst cases:
a call that blocks until released, many such requests at once, and a real grammar whose readings
multiply with each token the model writes (a recursive schema whose branches open alike)."""

from __future__ import annotations

import threading

import httpx
import numpy as np
import pytest

from tests.engine.test_grammar_budget import CALL, GRAMMAR, READ, CostlyMatcher
from tests.engine.test_step_budget import Recorder
from whiz.chat.messages import Message, Tool
from whiz.chat.template import ChatTemplate
from whiz.chat.toolgrammar import tool_call_grammar
from whiz.engine.fake import ByteTokenizer, fake_engine, last_user_message
from whiz.engine.gbnf import Gbnf, GbnfMatcher
from whiz.engine.grammar import Constraint
from whiz.engine.grammar_thread import GrammarThread, GrammarTooSlow
from whiz.engine.types import GenerateRequest, SamplingParams

PLAIN = "plain words that stream at their own pace " * 3


class Blocking(CostlyMatcher):
    """A real matcher whose `accept` of the call's `block_at`-th token waits until `release` is
    set: a C call that nothing can stop halfway."""

    def __init__(self, inner: GbnfMatcher, release: threading.Event, block_at: int = 3):
        super().__init__(inner, ms_per_id=0.0)
        self.release, self.left = release, block_at
        self.blocked = threading.Event()

    def accept(self, token: int) -> None:
        self.left -= 1
        if self.left == 0:
            self.blocked.set()
            self.release.wait()
        super().accept(token)


def script(conversation: str) -> str:
    return CALL if last_user_message(conversation) == "call" else PLAIN


async def _text(stream) -> str:
    return bytes(t for chunk in [c async for c in stream] for t in chunk.tokens).decode()


async def test_a_call_that_never_returns_ends_its_request_and_the_stream_beside_it_goes_on():
    engine = fake_engine(script, step_s=0.0, token_s=0.0)
    engine.grammar_thread.deadline_ms = 100.0
    release = threading.Event()
    made: list[Blocking] = []

    def blocking(gbnf: str, root: str) -> Blocking:
        made.append(Blocking(GbnfMatcher(Gbnf(gbnf, root), engine.tokenizer), release))
        return made[-1]

    engine.runtime.grammar = blocking
    recorder = Recorder(engine.runtime)
    template = ChatTemplate(engine.tokenizer)
    try:
        hi = template.encode([Message("user", "hi")])
        plain = engine.generate(GenerateRequest(hi, max_tokens=len(PLAIN), speculation=False))
        chunks = aiter(plain)
        first = await anext(chunks)
        call = template.encode([Message("user", "call")], [READ])
        stuck = engine.generate(GenerateRequest(call, max_tokens=40, grammar=GRAMMAR))
        rest = [chunk async for chunk in chunks]
        await _text(stuck)
        assert made and made[0].blocked.is_set() and not release.is_set()
        # The stream wrote everything, a token a step, while the grammar's call never returned.
        assert bytes(first.tokens + [t for c in rest for t in c.tokens]).decode() == PLAIN
        plain_seq = next(iter(recorder.steps[0]))
        assert all(plain_seq in step for step in recorder.steps[: len(PLAIN) - 1])
        assert stuck.stats.finish_reason == "error"
        assert "took more than 100 ms" in stuck.stats.error and "Simplify the schema" in stuck.stats.error
        assert engine.grammar_thread.timeouts == 1 and engine.grammar_thread.abandoned == 1
    finally:
        release.set()
        engine.close()


async def test_grammars_that_never_return_take_at_most_a_few_threads():
    engine = fake_engine(script, step_s=0.0, token_s=0.0, n_seq_max=6)
    runner = engine.grammar_thread
    runner.deadline_ms = 50.0
    release = threading.Event()
    made: list[Blocking] = []

    def blocking(gbnf: str, root: str) -> Blocking:
        made.append(Blocking(GbnfMatcher(Gbnf(gbnf, root), engine.tokenizer), release))
        return made[-1]

    engine.runtime.grammar = blocking
    call = ChatTemplate(engine.tokenizer).encode([Message("user", "call")], [READ])
    try:
        streams = [engine.generate(GenerateRequest(call, max_tokens=40, grammar=GRAMMAR)) for _ in range(4)]
        for stream in streams:
            await _text(stream)
        assert all(s.stats.finish_reason == "error" for s in streams)
        # Two calls were let go past their deadline; the others were refused before starting one.
        assert runner.timeouts == runner.abandoned == runner.most_abandoned == 2
        refused = [s for s in streams if "held by other requests" in s.stats.error]
        assert len(refused) == 2
        release.set()
        for m in made:
            m.blocked.wait()
        for worker in list(threading.enumerate()):
            if worker.name == "whiz-grammar" and worker is not threading.current_thread():
                worker.join(timeout=10)  # the calls let go return, and their threads end
        assert runner.abandoned == 0
        # Grammar requests are served again once the abandoned calls are back.
        engine.runtime.grammar = lambda gbnf, root: GbnfMatcher(Gbnf(gbnf, root), engine.tokenizer)
        again = engine.generate(GenerateRequest(call, max_tokens=len(CALL), grammar=GRAMMAR))
        assert await _text(again) == CALL and again.stats.error is None
    finally:
        release.set()
        engine.close()


def nested(depth: int) -> str:
    return (
        '<tool_call>\n{"name": "f", "arguments": {"x": '
        + "[" * depth
        + "1"
        + "]" * depth
        + "}}\n</tool_call>"
    )


RECURSIVE = {
    "$defs": {
        "n": {
            "anyOf": [
                {"type": "array", "items": {"$ref": "#/$defs/n"}},
                {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 3},
                {"type": "integer"},
            ]
        }
    },
    "type": "object",
    "properties": {"x": {"$ref": "#/$defs/n"}},
    "required": ["x"],
}
"""Each `[` may open either kind of array, and which one is known only at its `]`: the ways to
read the call double with every `[` the model writes."""


def test_a_grammar_whose_readings_double_with_each_token_is_stopped_by_the_deadline():
    tok = ByteTokenizer()
    grammar = tool_call_grammar([Tool("f", "", RECURSIVE)], required=True)
    runner = GrammarThread(deadline_ms=200.0)
    made: list[GbnfMatcher] = []

    def build(gbnf: str, root: str) -> GbnfMatcher:
        made.append(GbnfMatcher(Gbnf(gbnf, root), tok))
        return made[-1]

    # Large budgets: only the deadline is left to stop it.
    c = Constraint(grammar, tok, build, runner=runner, budget_ms=1e9)
    rng = np.random.default_rng(0)
    written = 0
    with pytest.raises(GrammarTooSlow, match="took more than 200 ms"):
        for ch in nested(40).encode():
            logits = np.zeros(tok.n_vocab, dtype=np.float32)
            logits[ch] = 20.0
            c.accept(c.pick(logits, SamplingParams(), rng))
            written += 1
    runner.close()
    # Through the call's opening and a dozen `[` (each doubling the readings), not to its end.
    assert 40 < written < len(nested(40)) - 40 and c.ended and not c.matching
    assert runner.timeouts == 1 and len(made) == 1


def test_over_http_the_request_past_the_deadline_gets_a_clear_error_not_a_hang(serve_fake):
    served = serve_fake(script)
    served.engine.grammar_thread.deadline_ms = 100.0
    release = threading.Event()

    def blocking(gbnf: str, root: str) -> Blocking:
        return Blocking(GbnfMatcher(Gbnf(gbnf, root), served.engine.tokenizer), release)

    served.engine.runtime.grammar = blocking
    tool = {"type": "function", "function": {"name": "read_file", "parameters": READ.parameters}}
    body = {"messages": [{"role": "user", "content": "call"}], "tools": [tool], "tool_choice": "required"}
    try:
        r = httpx.post(f"{served.base_url}/chat/completions", json=body, timeout=30)
        assert r.status_code >= 500 and r.json()["error"]["code"] == "engine_error"
        assert "took more than 100 ms" in r.text and "Simplify the schema" in r.text
        plain = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 12}
        r = httpx.post(f"{served.base_url}/chat/completions", json=plain, timeout=30)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == PLAIN[:12]
    finally:
        release.set()
