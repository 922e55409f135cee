"""Running completions on the engine: cache reuse between keystrokes, stale requests, limits."""

from __future__ import annotations

import asyncio

from whiz.completion.fake import fim_fake_engine, knows
from whiz.completion.fim import FimInput
from whiz.completion.service import CompletionRequest, CompletionService

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
