"""A grammar call past its deadline is stopped, not let go: matchers live in a child process that is
killed past the deadline, so the work ends and its core comes back, however many such calls come;
the request ends with an error saying so, and the other requests' matchers are built again in the
next child with what they had accepted. Worst cases: a call that never returns, and schemas built to
make matching costly (readings that double with each token, alike alternatives, long enums, a huge
pattern, deep nesting), each either matched or stopped, never left running."""

from __future__ import annotations

import os

import httpx
import numpy as np
import pytest

from tests.engine.test_grammar_budget import CALL, GRAMMAR, READ
from tests.engine.test_grammar_thread import RECURSIVE, nested
from whiz.chat.messages import Message, Tool
from whiz.chat.template import ChatTemplate
from whiz.chat.toolgrammar import tool_call_grammar
from whiz.engine.fake import ByteTokenizer, byte_matchers, fake_engine, last_user_message
from whiz.engine.grammar import Constraint
from whiz.engine.grammar_process import GrammarProcess
from whiz.engine.grammar_thread import GrammarTooSlow, GrammarUnavailable
from whiz.engine.types import GenerateRequest, SamplingParams

from .spinning import CRASH, NEVER, Spinning, spinning_matchers


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def left_running(host: GrammarProcess) -> list[int]:
    """Children still alive other than the one taking calls and its spare."""
    keep = {c.process.pid for c in (host._child, host._spare) if c is not None}
    return [pid for pid in host.pids if pid not in keep and running(pid)]


def test_calls_past_the_deadline_are_stopped_and_grammar_requests_are_served_again():
    host = GrammarProcess(spinning_matchers, deadline_ms=300.0)
    gbnf = GRAMMAR.gbnf
    try:
        # A bystander, half way through a call, in the child that will be killed.
        bystander = host.matcher(None, gbnf, "tagged")
        for ch in b"<tool_call>\n{":
            bystander.accept(ch)
        for _ in range(4):  # more than the thread could ever let go (MOST_ABANDONED)
            assert host.wait_spare(30)  # forked in ms; its first import may take longer
            victim = host.matcher(None, gbnf, "tagged")
            killed = host._child.process.pid
            with pytest.raises(GrammarTooSlow, match="work was stopped"):
                victim.accept(NEVER)
            assert not running(killed) and left_running(host) == []
            assert host.abandoned == 0
        assert host.timeouts == 4
        # Capacity is back: a cheap call is matched, and the bystander goes on where it was.
        fresh = byte_matchers()(gbnf, "tagged")
        for ch in b"<tool_call>\n{":
            fresh.accept(ch)
        probe = np.arange(256)
        assert (bystander.allowed(probe) == (Spinning(fresh).allowed(probe))).all()
        bystander.accept(ord('"'))
        assert bystander.tokens[-1] == ord('"')
    finally:
        host.close()
    assert all(not running(pid) for pid in host.pids)


def script(conversation: str) -> str:
    return "<tool_call>\n!" if last_user_message(conversation) == "stuck" else CALL


async def _text(stream) -> str:
    return bytes(t for chunk in [c async for c in stream] for t in chunk.tokens).decode()


async def test_many_stuck_grammar_requests_do_not_deny_tool_calls_to_the_next_client():
    # On the grammar thread, two such calls left running refuse every later grammar request
    # (test_grammar_thread.py::test_grammars_that_never_return_take_at_most_a_few_threads).
    engine = fake_engine(script, step_s=0.0, token_s=0.0)
    engine.grammar_thread.close()
    engine.grammar_thread = GrammarProcess(spinning_matchers, deadline_ms=200.0)
    template = ChatTemplate(engine.tokenizer)
    try:
        stuck = template.encode([Message("user", "stuck")], [READ])
        for _ in range(3):
            assert engine.grammar_thread.wait_spare(30)
            s = engine.generate(GenerateRequest(stuck, max_tokens=20, grammar=GRAMMAR))
            await _text(s)
            assert s.stats.finish_reason == "error" and "took more than 200 ms" in s.stats.error
        call = template.encode([Message("user", "call")], [READ])
        assert engine.grammar_thread.wait_spare(30)
        good = engine.generate(GenerateRequest(call, max_tokens=len(CALL), grammar=GRAMMAR))
        assert await _text(good) == CALL and good.stats.error is None
        assert left_running(engine.grammar_thread) == [] and engine.grammar_thread.timeouts == 3
    finally:
        engine.close()


def _enum_schema(n: int) -> dict:
    return {"type": "object", "properties": {"x": {"enum": [f"value-{'a' * 40}-{i}" for i in range(n)]}}}


def _alike_schema(n: int) -> dict:
    branches = [
        {
            "type": "object",
            "properties": {"kind": {"const": "k"}, f"f{i}": {"type": "string"}},
            "required": ["kind"],
        }
        for i in range(n)
    ]
    return {"type": "object", "properties": {"x": {"anyOf": branches}}, "required": ["x"]}


def _deep_schema(d: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(d):
        schema = {"type": "array", "items": schema}
    return {"type": "object", "properties": {"x": schema}, "required": ["x"]}


SHAPES = {
    "doubling": (RECURSIVE, nested(40)),
    "alike branches": (
        _alike_schema(24),
        '<tool_call>\n{"name": "f", "arguments": {"x": {"kind": "k"}}}\n</tool_call>',
    ),
    "long enum": (
        _enum_schema(400),
        '<tool_call>\n{"name": "f", "arguments": {"x": "value-' + "a" * 40 + '-7"}}\n</tool_call>',
    ),
    "huge pattern": (
        {"type": "object", "properties": {"x": {"type": "string", "pattern": "(a|a?)+" * 2000}}},
        '<tool_call>\n{"name": "f", "arguments": {"x": "aaaa"}}\n</tool_call>',
    ),
    "deep nesting": (_deep_schema(12), nested(12)),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_costly_grammar_is_matched_or_stopped_never_left_running(shape):
    schema, text = SHAPES[shape]
    grammar = tool_call_grammar([Tool("f", "", schema)], required=True)
    host = GrammarProcess(byte_matchers, deadline_ms=300.0)
    tok = ByteTokenizer()
    c = Constraint(grammar, tok, None, runner=host, budget_ms=1e9)  # only the deadline stops it
    rng = np.random.default_rng(0)
    try:
        try:
            for ch in text.encode():
                logits = np.zeros(tok.n_vocab, dtype=np.float32)
                logits[ch] = 20.0
                c.accept(c.pick(logits, SamplingParams(), rng))
            stopped = False
        except GrammarTooSlow as exc:
            assert "work was stopped" in str(exc)
            stopped = True
        assert left_running(host) == [] and host.timeouts == int(stopped)
        if shape == "doubling":  # the one known to pass any deadline: it must have been stopped
            assert stopped
        # Whatever that grammar did, the next request's grammar is matched.
        after = Constraint(GRAMMAR, tok, None, runner=host)
        out = []
        for ch in CALL.encode():
            logits = np.zeros(tok.n_vocab, dtype=np.float32)
            logits[ch] = 20.0
            out.append(after.pick(logits, SamplingParams(), rng))
            after.accept(out[-1])
        assert bytes(out).decode() == CALL and after.dropped is None
    finally:
        host.close()
    assert all(not running(pid) for pid in host.pids)


def test_over_http_a_stopped_grammar_call_is_an_error_that_says_so_and_the_next_call_is_served(serve_fake):
    served = serve_fake(lambda conv: "<tool_call>\n!" if "stuck" in conv else CALL)
    served.engine.grammar_thread.close()
    served.engine.grammar_thread = host = GrammarProcess(spinning_matchers, deadline_ms=200.0)
    tool = {"type": "function", "function": {"name": "read_file", "parameters": READ.parameters}}

    def ask(content: str) -> httpx.Response:
        body = {
            "messages": [{"role": "user", "content": content}],
            "tools": [tool],
            "tool_choice": "required",
        }
        assert host.wait_spare(30)
        return httpx.post(f"{served.base_url}/chat/completions", json=body, timeout=30)

    for _ in range(3):
        r = ask("stuck")
        assert r.status_code >= 500 and r.json()["error"]["code"] == "engine_error"
        assert "took more than 200 ms for one call, so that work was stopped" in r.json()["error"]["message"]
    r = ask("read a.py")
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["tool_calls"], r.text
    assert left_running(host) == [] and host.timeouts == 3


def test_a_child_that_dies_mid_call_ends_that_request_clearly_and_the_next_is_served():
    host = GrammarProcess(spinning_matchers, deadline_ms=5000.0)
    try:
        assert host.wait_spare(30)
        victim = host.matcher(None, GRAMMAR.gbnf, "tagged")
        dead = host._child.process.pid
        with pytest.raises(GrammarUnavailable, match="ended in the middle of a call"):
            victim.accept(CRASH)
        assert not running(dead) and host.wait_spare(30)
        fresh = host.matcher(None, GRAMMAR.gbnf, "tagged")
        fresh.accept(ord("<"))
        assert fresh.can_end() is False and host.timeouts == 0
    finally:
        host.close()
