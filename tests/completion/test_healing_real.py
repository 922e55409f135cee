"""Token healing on the real model: typing stops mid-token, and the completion still fits.

Typed up to `self._munge_whitespace(` in textwrap's `_split_chunks`, a prompt that ends in the
`(` token made the 0.5B write `unicode(text))` (its tokenizer joins `(` to the word after it, so
it never read a bare `(` before `text`); with the `(` left for the model to write again, under a
grammar that keeps what was typed, it completes `text)`."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import model_threads
from whiz.bench.complete import cases, pauses
from whiz.completion.fim import FimInput
from whiz.completion.service import CompletionRequest, CompletionService
from whiz.config import ServeSettings


@pytest.mark.model
def test_a_completion_after_an_open_bracket_continues_the_typed_call():
    from whiz.engine.factory import load_engine

    case = cases(True, 2400)[0]  # the function with a little of its file: a short prefill
    assert case.name == "textwrap.TextWrapper._split_chunks"
    found = [p for p in pauses(case, 20) if p[0].endswith("self._munge_whitespace(")]
    if not found:  # another Python's textwrap
        pytest.skip("this Python's textwrap._split_chunks does not start with _munge_whitespace")
    before, after, rest = found[0]
    assert rest == "text)"
    engine = load_engine(
        ServeSettings(
            model="qwen2.5-coder-0.5b", prefix_cache=False, slots=1, ctx=4096, threads=model_threads()
        )
    )

    async def main() -> str:
        done = CompletionService(engine).start(CompletionRequest(FimInput(before, after), max_tokens=16))
        async for _ in done.deltas():
            pass
        assert done.result is not None
        return done.result.text

    try:
        text = asyncio.run(main())
    finally:
        engine.close()
    assert text == "text)"
