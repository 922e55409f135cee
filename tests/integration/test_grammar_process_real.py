"""llama.cpp's matcher in the grammar process, with the 0.5B's vocabulary: schemas built to make
matching costly are each matched or stopped (the child killed), never left running, and a plain
tool grammar is matched right after each."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from tests.engine.test_grammar_budget import READ
from tests.engine.test_grammar_process import SHAPES, left_running, running
from tests.integration.test_tool_grammar_real import vocab  # noqa: F401 (a fixture)
from whiz.chat.messages import Tool
from whiz.chat.toolgrammar import tool_call_grammar
from whiz.engine.grammar import Constraint
from whiz.engine.grammar_process import GrammarProcess
from whiz.engine.grammar_thread import GrammarTooSlow
from whiz.engine.llamacpp import vocabulary_matchers
from whiz.engine.types import SamplingParams
from whiz.models import ModelStore, default_home

pytestmark = pytest.mark.model

CALL = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'


def follow(c: Constraint, tokenizer, text: str) -> list[int]:
    out = []
    for token in tokenizer.encode(text):
        logits = np.zeros(tokenizer.n_vocab, dtype=np.float32)
        logits[token] = 20.0
        out.append(c.pick(logits, SamplingParams(), np.random.default_rng(0)))
        c.accept(out[-1])
    return out


@pytest.mark.parametrize("shape", SHAPES)
def test_a_costly_llama_cpp_grammar_is_matched_or_stopped_never_left_running(vocab, shape):  # noqa: F811
    _, _, tokenizer = vocab
    path = ModelStore(default_home()).resolve("qwen2.5-coder-0.5b", pull=False)
    assert path is not None and Path(path).is_file()
    host = GrammarProcess(functools.partial(vocabulary_matchers, str(path)), deadline_ms=300.0)
    schema, text = SHAPES[shape]
    try:
        assert host.wait_spare(60)
        c = Constraint(
            tool_call_grammar([Tool("f", "", schema)], required=True),
            tokenizer,
            None,
            runner=host,
            budget_ms=1e9,
        )
        try:
            follow(c, tokenizer, text)
            stopped = False
        except GrammarTooSlow as exc:
            assert "work was stopped" in str(exc)
            stopped = True
        assert left_running(host) == [] and host.timeouts == int(stopped)
        assert host.wait_spare(60)
        after = Constraint(tool_call_grammar([READ], required=True), tokenizer, None, runner=host)
        written = b"".join(tokenizer.piece(t) for t in follow(after, tokenizer, CALL)).decode()
        assert written == CALL and after.dropped is None
    finally:
        host.close()
    assert all(not running(pid) for pid in host.pids)
