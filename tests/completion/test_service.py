"""Running completions on the engine: cache reuse between keystrokes, stale requests, limits."""

from __future__ import annotations

import asyncio

from whiz.completion.fake import fim_fake_engine, knows
from whiz.completion.fim import FimInput
from whiz.completion.service import CompletionOptions, CompletionRequest, CompletionService

DOC = (
    "import math\n\n\n"
    "def area(r):\n"
    '    """The area of a circle of radius r."""\n'
    "    return math.pi * r * r\n\n\n"
    "def main():\n"
    "    print(area(2))\n"
)
CURSOR = DOC.index("return math.pi")
LINE_END = DOC.index("\n", CURSOR)


def run(coro):
    return asyncio.run(coro)


async def complete(service: CompletionService, before: str, after: str, **kw):
    c = service.start(CompletionRequest(FimInput(before, after), **kw))
    text = "".join([d async for d in c.deltas()])
    assert c.result is not None and text == c.result.text
    return c.result


def test_the_next_keystroke_prefills_only_what_was_typed():
    async def main():
        engine = fim_fake_engine(knows(DOC))
        service = CompletionService(engine)
        try:
            first = await complete(service, DOC[:CURSOR], DOC[LINE_END:], client="ed")
            assert first.text == "return math.pi * r * r"
            typed = await complete(service, DOC[: CURSOR + 1], DOC[LINE_END:], client="ed")
            assert typed.text == "eturn math.pi * r * r"
            assert typed.stats.prefill_tokens <= 2 < first.stats.prefill_tokens
            assert typed.stats.cached_tokens >= typed.prompt_tokens - 2
        finally:
            engine.close()

    run(main())


def test_a_newer_request_from_the_same_client_cancels_the_older_at_once():
    async def main():
        engine = fim_fake_engine(knows(DOC), step_s=0.02)
        service = CompletionService(engine)
        try:
            old = service.start(CompletionRequest(FimInput(DOC[:CURSOR], DOC[LINE_END:]), client="ed"))
            reading = asyncio.ensure_future(asyncio.wait_for(_drain(old), 5))
            await asyncio.sleep(0.1)
            newer = await complete(service, DOC[: CURSOR + 2], DOC[LINE_END:], client="ed")
            await reading
            assert old.result is not None and old.result.stop_type == "cancelled" and old.result.text == ""
            assert old.result.output_tokens < len("return math.pi * r * r")
            assert newer.text == "turn math.pi * r * r"
        finally:
            engine.close()

    run(main())


def test_requests_of_other_clients_and_warm_ups_cancel_nothing():
    async def main():
        engine = fim_fake_engine(knows(DOC), step_s=0.01)
        service = CompletionService(engine)
        try:
            mine = service.start(CompletionRequest(FimInput(DOC[:CURSOR], DOC[LINE_END:]), client="ed"))
            reading = asyncio.ensure_future(_drain(mine))
            await asyncio.sleep(0.05)
            other = await complete(service, DOC[:CURSOR], DOC[LINE_END:], client="someone else")
            warm = await complete(service, "", "", client="ed", max_tokens=0)
            await reading
            assert mine.result.text == other.text == "return math.pi * r * r"
            assert warm.text == "" and warm.output_tokens == 0
        finally:
            engine.close()

    run(main())


def test_n_predict_caps_the_output():
    async def main():
        engine = fim_fake_engine(knows(DOC))
        try:
            result = await complete(CompletionService(engine), DOC[:CURSOR], DOC[LINE_END:], max_tokens=5)
            assert result.output_tokens == 5 and result.stop_type == "limit"
            assert "return math.pi".startswith(result.text)  # what came, less the spaces it wrote again
        finally:
            engine.close()

    run(main())


def test_past_t_max_predict_ms_the_first_complete_line_is_the_answer():
    body = "def main():\n"
    doc = body + "    a = 1\n    b = 2\n    c = 3\n    return a + b + c\n"

    async def main():
        engine = fim_fake_engine(knows(doc), step_s=0.005)
        try:
            result = await complete(CompletionService(engine), body, "", t_max_predict_ms=1)
            assert result.text == "    a = 1" and result.stop_type == "limit"
        finally:
            engine.close()

    run(main())


def test_stop_strings_end_the_completion():
    async def main():
        engine = fim_fake_engine(knows(DOC))
        try:
            result = await complete(CompletionService(engine), DOC[:CURSOR], DOC[LINE_END:], stop=[" * r"])
            assert result.text == "return math.pi" and result.stop_type == "word"
        finally:
            engine.close()

    run(main())


async def _drain(completion) -> None:
    async for _ in completion.deltas():
        pass


LONG_DOC = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(12))
LONG_DOC += "def g(y):\n    return y * 2\n"


def test_an_edit_above_the_cursor_reuses_the_moved_cache_instead_of_prefilling_it():
    cursor = LONG_DOC.index("return y * 2")
    line_end = LONG_DOC.index("\n", cursor)
    f2 = "def f2(x):\n    return x + 2\n\n\n"
    edited = LONG_DOC.replace(f2, "")

    async def edit(reuse: int):
        engine = fim_fake_engine(knows(edited))
        service = CompletionService(engine, CompletionOptions(reuse_chunk_tokens=reuse))
        try:
            await complete(service, LONG_DOC[:cursor], LONG_DOC[line_end:], client="ed")
            # f2 deleted, above the cursor
            return await complete(service, edited[: cursor - len(f2)], LONG_DOC[line_end:], client="ed")
        finally:
            engine.close()

    reused, plain = run(edit(64)), run(edit(0))
    assert reused.text == plain.text == "return y * 2"
    # Without reuse everything after the deleted lines is prefilled again; with it, nearly nothing.
    assert plain.stats.prefill_tokens > 200
    assert reused.stats.prefill_tokens <= 2


def test_typing_down_past_a_block_of_lines_keeps_the_suffix_cached():
    body = "def walk(items):\n" + "".join(f"    x{i} = items[{i}]\n" for i in range(12))
    doc = body + "    return x0\n\n\ndef other():\n    return 1\n"
    after = doc[len(body) :]

    async def main():
        engine = fim_fake_engine(knows(doc))
        service = CompletionService(engine)
        try:
            lines = body.splitlines(keepends=True)
            await complete(service, "".join(lines[:5]), after, client="ed")
            # Lines 5 to 11 typed: the cursor is in the next block of 8 lines, the suffix unchanged.
            later = await complete(service, "".join(lines[:12]), after, client="ed")
            return later
        finally:
            engine.close()

    later = run(main())
    assert later.stats.prefill_tokens < 7 * len("    x0 = items[0]\n") + 10  # what was typed, not the suffix


def test_the_rest_of_the_last_completion_is_drafted_so_the_next_keystroke_decodes_in_few_steps():
    async def steps(remember: bool) -> tuple[str, int]:
        engine = fim_fake_engine(knows(DOC), step_s=0.0)
        service = CompletionService(engine)
        try:
            await complete(service, DOC[:CURSOR], DOC[LINE_END:], client="ed" if remember else "other")
            before = engine.steps
            typed = await complete(service, DOC[: CURSOR + 3], DOC[LINE_END:], client="ed")
            return typed.text, engine.steps - before
        finally:
            engine.close()

    text, with_prediction = run(steps(True))
    same, without = run(steps(False))
    assert text == same == "urn math.pi * r * r"
    assert with_prediction <= 4 < without


def test_a_finished_line_is_answered_without_waiting_for_the_engines_next_step():
    before, after = "a = ", "\n\n\nz = 0\n"

    async def main():
        # The fake writes "1", then the next lines, one slow step per byte: the line ends first.
        engine = fim_fake_engine(lambda prefix, suffix: "a = 1\nb = 2\nc = 3", step_s=0.3)
        try:
            result = await complete(CompletionService(engine), before, after, client="ed")
            in_flight = engine.status()["active"]  # the step after the newline is still running
            return result, in_flight
        finally:
            engine.close()

    result, in_flight = run(main())
    assert result.text == "1" and in_flight == 1


def test_the_cursor_lines_partial_word_is_written_by_the_model_and_a_different_word_gives_nothing():
    async def main():
        cursor = DOC.index("pi * r")  # after "math."
        engine = fim_fake_engine(knows(DOC))
        service = CompletionService(engine)
        try:
            done = await complete(service, DOC[:cursor], DOC[LINE_END:])
            assert done.text == "pi * r * r"  # the model wrote "." again; it is not shown twice
            # What was typed disagrees with what this model writes where "." ends the prompt.
            other = DOC[:cursor].replace("math.", "math(")
            assert (await complete(service, other, DOC[LINE_END:])).text == ""
        finally:
            engine.close()

    run(main())
