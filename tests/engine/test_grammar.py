"""Decoding under the tool-call grammar, on the fake engine: free text until a call starts, then
only what the grammar allows; speculation changes nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from whiz.chat.messages import Message, Tool
from whiz.chat.template import ChatTemplate
from whiz.chat.toolcalls import TextPart, ToolCallParser
from whiz.chat.toolgrammar import request_grammar, tool_call_grammar
from whiz.engine.fake import fake_engine
from whiz.engine.grammar import Constraint
from whiz.engine.types import GenerateRequest, SamplingParams

READ = Tool(
    "read_file",
    "",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
GRAMMAR = tool_call_grammar([READ])
UNCLOSED = (
    'I will read it first.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}\n</tool_call>'
)
"""A call a small model writes: its JSON is one brace short."""


async def generate(script: str, *, grammar=GRAMMAR, max_tokens: int = 400, **engine_kw) -> tuple[str, object]:
    sampling = engine_kw.pop("sampling", SamplingParams())
    speculation = engine_kw.pop("speculation", True)
    engine = fake_engine(lambda conv: script, step_s=0.0, token_s=0.0, **engine_kw)
    try:
        prompt = ChatTemplate(engine.tokenizer).encode([Message("user", "read a.py: " + script)], [READ])
        request = GenerateRequest(
            prompt, max_tokens=max_tokens, sampling=sampling, grammar=grammar, speculation=speculation
        )
        stream = engine.generate(request)
        tokens = [t async for chunk in stream for t in chunk.tokens]
        return bytes(tokens).decode(errors="replace"), stream.stats
    finally:
        engine.close()


def parsed(text: str) -> list:
    parser = ToolCallParser(names=["read_file"])
    return parser.feed(text) + parser.finish()


async def test_text_before_the_call_is_free_and_the_call_comes_out_whole():
    text, _ = await generate(UNCLOSED)
    assert text.startswith(UNCLOSED[: UNCLOSED.index("}") + 1])
    prose, call = parsed(text)
    assert prose == TextPart("I will read it first.\n")
    assert (call.name, json.loads(call.arguments)) == ("read_file", {"path": "a.py"})


async def test_without_the_grammar_the_same_reply_is_no_call():
    text, _ = await generate(UNCLOSED, grammar=None)
    assert text == UNCLOSED
    assert all(isinstance(p, TextPart) for p in parsed(text))


async def test_after_a_closed_call_the_text_is_free_again():
    script = (
        'Two reads.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>\n'
        "and { free text } then\n"
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "b.py"}}\n</tool_call>'
    )
    text, _ = await generate(script)
    assert text == script
    assert [json.loads(p.arguments)["path"] for p in parsed(text) if not isinstance(p, TextPart)] == [
        "a.py",
        "b.py",
    ]


async def test_a_reply_that_opens_as_a_call_is_held_to_the_call_alone():
    script = '{"name": "read_file", "arguments": {"path": "a.py"}} and a remark the parser would trip on'
    free, _ = await generate(script, grammar=None)
    assert all(isinstance(p, TextPart) for p in parsed(free))
    text, _ = await generate(script)
    assert text.rstrip("\n") == script[: script.index("}}") + 2]
    [call] = parsed(text)
    assert json.loads(call.arguments) == {"path": "a.py"}


async def test_json_that_is_not_a_call_stays_free():
    script = '{"path": "a.py", "note": "not a call"} fine'
    text, _ = await generate(script)
    assert text == script


@pytest.mark.parametrize(
    "sampling",
    [SamplingParams(), SamplingParams(temperature=1.0, top_k=5, seed=1)],
    ids=["greedy", "sampled"],
)
async def test_speculation_changes_nothing_under_the_grammar(sampling):
    # A low confidence makes sampling stray, so the grammar has wrong tokens to refuse; the draft
    # model guesses wrong every third token, so verification both keeps and rejects drafts.
    kw = {"confidence": 5.0, "sampling": sampling, "max_tokens": 150}
    plain, _ = await generate(UNCLOSED, speculation=False, **kw)
    drafted, stats = await generate(UNCLOSED, draft_miss_every=3, **kw)
    assert stats.draft_accepted > 0 and stats.draft_rejected > 0
    assert drafted == plain
    [call] = [p for p in parsed(plain) if not isinstance(p, TextPart)]
    assert json.loads(call.arguments) == {"path": "a.py"}


async def test_a_required_call_leaves_no_room_for_prose():
    required = request_grammar([READ], "required")
    call = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'
    text, _ = await generate(call, grammar=required)
    assert text == call  # a call the model writes anyway is unchanged
    engine = fake_engine()
    try:
        constraint = Constraint(
            required, engine.tokenizer, engine.runtime.grammar, clock=engine.matching_clock
        )
        logits = np.zeros(engine.tokenizer.n_vocab, dtype=np.float32)
        logits[[ord("S"), ord("<"), ord("{")]] = [9.0, 5.0, 6.0]  # the model would start with prose
        assert constraint.pick(logits, SamplingParams(), np.random.default_rng(0)) == ord("{")
    finally:
        engine.close()
