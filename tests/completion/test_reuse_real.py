"""Shifted-chunk reuse on the real model: a completion after lines deleted above the cursor is the
one a fresh prefill of the same prompt gives, while only a few of its tokens are prefilled.

Reuse is not exact (a moved chunk keeps keys and values computed after the deleted text), so the
deleted lines here are a comment the completion does not depend on, and the cursor sits where the
model is sure of every token it writes (its top two logits at least 1.0 apart, with the weights
repacked or not): where two tokens nearly tie, a kernel's rounding decides between them, and the
reused and the fresh prompt could rightly part. A shift gone wrong (cells not moved, keys not
rotated to their new positions) fails the decode or changes the completion."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import model_threads
from whiz.completion.fim import FimInput
from whiz.completion.service import CompletionRequest, CompletionResult, CompletionService
from whiz.config import ServeSettings

HEAD = "import os\nimport sys\n\n\n"
GONE = (
    "# Copyright (c) the authors.\n#\n# Licensed under the MIT license.\n#\n"
    "# A small command line tool.\n#\n# Usage: tool [flags] files\n#\n"
)
TAIL = (
    "def parse(argv):\n"
    '    """Return the flags and the file names in argv."""\n'
    "    flags = [a for a in argv if a.startswith('-')]\n"
    "    names = [a for a in argv if not a.startswith('-')]\n"
    "    return flags, names\n\n\n"
    "def main():\n"
    "    flags, names = parse(sys.argv[1:])\n"
    "    verbose = '-v' in flags\n"
    "    print(f'{len(flags)} flags, "
)
AFTER = "\n\n\nif __name__ == '__main__':\n    main()\n"


@pytest.mark.model
def test_reuse_after_deleted_lines_gives_the_fresh_prefills_output():
    from whiz.engine.factory import load_engine

    assert GONE.count("\n") == 8  # one block of lines: both requests lay the prompt out alike
    engine = load_engine(
        ServeSettings(
            model="qwen2.5-coder-0.5b", prefix_cache=False, slots=2, ctx=1024, threads=model_threads()
        )
    )
    service = CompletionService(engine)

    async def complete(before: str, client: str | None) -> CompletionResult:
        done = service.start(CompletionRequest(FimInput(before, AFTER), max_tokens=12, client=client))
        async for _ in done.deltas():
            pass
        assert done.result is not None
        return done.result

    async def main() -> tuple[CompletionResult, CompletionResult]:
        await complete(HEAD + GONE + TAIL, "ed")
        reused = await complete(HEAD + TAIL, "ed")  # the same client, lines deleted above
        await complete("x = 1\n", "ed")  # its slot holds something else now: nothing to copy
        fresh = await complete(HEAD + TAIL, None)  # prefilled from the start, in the other slot
        return reused, fresh

    try:
        reused, fresh = asyncio.run(main())
    finally:
        engine.close()
    assert reused.text == fresh.text and reused.text.strip()
    assert reused.prompt_tokens == fresh.prompt_tokens  # the same prompt
    assert reused.stats.prefill_tokens <= 2 < 40 < fresh.stats.prefill_tokens
