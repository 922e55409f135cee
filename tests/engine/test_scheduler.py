"""The batch engine over the fake runtime: caching, sharing, interleaving, cancel, eviction."""

from __future__ import annotations

import asyncio
import time

import pytest

from whiz.chat.messages import Message
from whiz.chat.template import ChatTemplate
from whiz.engine.fake import echo_script, fake_engine, last_user_message
from whiz.engine.types import GenerateRequest
from whiz.errors import ContextOverflow


def prompt(engine, *turns: str, system: str | None = None) -> list[int]:
    msgs = ([Message("system", system)] if system else []) + [Message("user", t) for t in turns]
    return ChatTemplate(engine.tokenizer).encode(msgs)


async def collect(stream) -> list[int]:
    return [t async for chunk in stream for t in chunk.tokens]


def text(tokens: list[int]) -> str:
    return bytes(tokens).decode()


@pytest.fixture
def engine():
    e = fake_engine()
    yield e
    e.close()


async def test_generates_the_scripted_reply(engine):
    stream = engine.generate(GenerateRequest(prompt=prompt(engine, "hello"), max_tokens=100))
    assert text(await collect(stream)) == "echo: hello"
    assert stream.stats.finish_reason == "stop"
    assert stream.stats.decode_tokens == len("echo: hello")


async def test_follow_up_turn_prefills_only_the_new_tokens(engine):
    first = prompt(engine, "hello")
    s1 = engine.generate(GenerateRequest(prompt=first, max_tokens=100, session="a"))
    out = await collect(s1)
    follow = (
        first
        + out
        + engine.tokenizer.encode("<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n")
    )
    s2 = engine.generate(GenerateRequest(prompt=follow, max_tokens=100, session="a"))
    assert text(await collect(s2)) == "echo: more"
    # The whole first turn is cached (drafting may have cached its closing token too).
    assert s2.stats.cached_tokens >= len(first) + len(out)
    assert s2.stats.prefill_tokens == len(follow) - s2.stats.cached_tokens


async def test_new_session_reuses_another_sessions_prefix_without_evicting_it(engine):
    system = "You are a coding agent. " * 40
    a = prompt(engine, "first task", system=system)
    await collect(engine.generate(GenerateRequest(prompt=a, max_tokens=100, session="a")))
    b = prompt(engine, "second task", system=system)
    sb = engine.generate(GenerateRequest(prompt=b, max_tokens=100, session="b"))
    assert text(await collect(sb)) == "echo: second task"
    shared = len(engine.tokenizer.encode(ChatTemplate(engine.tokenizer).system_text(system, ())))
    assert sb.stats.cached_tokens >= shared
    # Session a's own cache is still whole: its next turn is fully cached.
    again = engine.generate(GenerateRequest(prompt=a, max_tokens=100, session="a"))
    await collect(again)
    assert again.stats.cached_tokens == len(a) - 1


async def test_sessions_interleave_in_one_batch(engine):
    streams = [
        engine.generate(GenerateRequest(prompt=prompt(engine, f"task {i}"), max_tokens=50)) for i in range(3)
    ]
    outs = await asyncio.gather(*(collect(s) for s in streams))
    assert [text(o) for o in outs] == [f"echo: task {i}" for i in range(3)]
    # Three sequences decoded together need far fewer steps than one after another.
    assert engine.steps < sum(len(o) for o in outs)


async def test_more_requests_than_slots_wait_their_turn(engine):
    n = engine.runtime.n_seq_max + 3
    streams = [
        engine.generate(GenerateRequest(prompt=prompt(engine, f"q{i}"), max_tokens=20)) for i in range(n)
    ]
    outs = await asyncio.gather(*(collect(s) for s in streams))
    assert [text(o) for o in outs] == [f"echo: q{i}" for i in range(n)]


async def test_cancel_stops_within_one_step():
    engine = fake_engine(lambda _: "x" * 5000, step_s=0.01)
    try:
        # One token per step without drafts, so "within one step" is countable in tokens.
        stream = engine.generate(
            GenerateRequest(prompt=prompt(engine, "go"), max_tokens=5000, speculation=False)
        )
        got = 0
        async for chunk in stream:
            got += len(chunk.tokens)
            if got == 10:
                steps_at_cancel = engine.steps
                stream.cancel()
        assert stream.stats.finish_reason == "cancelled"
        assert engine.steps - steps_at_cancel <= 1
        assert got <= 11
    finally:
        engine.close()


async def test_cancel_while_waiting_for_a_slot():
    engine = fake_engine(lambda _: "y" * 300, n_seq_max=1, step_s=0.005)
    try:
        busy = engine.generate(GenerateRequest(prompt=prompt(engine, "a"), max_tokens=300))
        queued = engine.generate(GenerateRequest(prompt=prompt(engine, "b"), max_tokens=300))
        queued.cancel()
        assert await collect(queued) == []
        assert queued.stats.finish_reason == "cancelled"
        busy.cancel()
        await collect(busy)
    finally:
        engine.close()


async def test_a_sessions_next_request_right_after_a_cancel_finds_its_own_cache():
    """An editor cancels a completion the moment it has a line and sends the next keystroke's
    request at once: that request must land in the session's own slot, whose cache holds the
    text it reuses (here moved up, lines above it deleted), not in another to be prefilled."""
    engine = fake_engine(lambda _: "z" * 400, step_s=0.005)
    try:
        body = "def f(x):\n    return x\n" * 8
        before, after = prompt(engine, "# deleted line\n" * 4 + body), prompt(engine, body)
        s1 = engine.generate(GenerateRequest(before, 400, session="ed", speculation=False))
        first = asyncio.create_task(collect(s1))
        while engine.steps < 3:
            await asyncio.sleep(0.001)
        s1.cancel()  # still decoding: the engine sees the cancel at its next step at the earliest
        s2 = engine.generate(GenerateRequest(after, 5, session="ed", reuse_chunk=64))
        await asyncio.wait_for(asyncio.gather(first, collect(s2)), 10)
        assert s1.stats.finish_reason == "cancelled"
        assert s2.stats.prefill_tokens <= 2
    finally:
        engine.close()


async def test_warm_up_loads_the_prompt_without_generating(engine):
    p = prompt(engine, "warm")
    warm = engine.generate(GenerateRequest(prompt=p, max_tokens=0, session="w"))
    assert await collect(warm) == []
    assert warm.stats.finish_reason == "stop"
    follow = engine.generate(GenerateRequest(prompt=p, max_tokens=50, session="w"))
    assert text(await collect(follow)) == "echo: warm"
    assert follow.stats.cached_tokens == len(p) - 1


async def test_full_cache_evicts_idle_sessions_and_rebuilds_them():
    engine = fake_engine(n_ctx=700, n_seq_max=4)
    try:
        pa = prompt(engine, "a" * 200)
        await collect(engine.generate(GenerateRequest(prompt=pa, max_tokens=300, session="a")))
        for name in "bcd":
            await collect(engine.generate(GenerateRequest(prompt=prompt(engine, name * 200), max_tokens=300)))
        assert engine.evictions > 0
        again = engine.generate(GenerateRequest(prompt=pa, max_tokens=300, session="a"))
        assert text(await collect(again)) == "echo: " + "a" * 200
        assert again.stats.cached_tokens < len(pa) - 1  # rebuilt: it re-prefilled
    finally:
        engine.close()


async def test_prompt_longer_than_the_context_is_refused():
    engine = fake_engine(n_ctx=256)
    try:
        with pytest.raises(ContextOverflow):
            engine.generate(GenerateRequest(prompt=list(range(100)) * 3, max_tokens=10))
        # The engine still serves the next request.
        ok = engine.generate(GenerateRequest(prompt=prompt(engine, "hi"), max_tokens=20))
        assert text(await collect(ok)) == "echo: hi"
    finally:
        engine.close()


async def test_output_is_cut_at_the_context_window():
    engine = fake_engine(lambda _: "z" * 1000, n_ctx=256)
    try:
        p = prompt(engine, "long")
        stream = engine.generate(GenerateRequest(prompt=p, max_tokens=1000))
        out = await collect(stream)
        assert len(p) + len(out) == 256
        assert stream.stats.finish_reason == "length"
    finally:
        engine.close()


async def test_a_runtime_failure_ends_the_request_not_the_engine(engine):
    real_decode = engine.runtime.decode
    calls = {"n": 0}

    def flaky(rows):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real_decode(rows)

    engine.runtime.decode = flaky
    bad = engine.generate(GenerateRequest(prompt=prompt(engine, "x"), max_tokens=20))
    await collect(bad)
    assert bad.stats.finish_reason == "error" and "boom" in bad.stats.error
    good = engine.generate(GenerateRequest(prompt=prompt(engine, "y"), max_tokens=20))
    assert text(await collect(good)) == "echo: y"


async def test_ttft_and_decode_timings_are_reported():
    engine = fake_engine(echo_script, step_s=0.003)
    try:
        start = time.perf_counter()
        stream = engine.generate(GenerateRequest(prompt=prompt(engine, "timing"), max_tokens=50))
        await collect(stream)
        wall_ms = (time.perf_counter() - start) * 1000
        s = stream.stats
        assert 0 < s.ttft_ms <= wall_ms
        assert 0 < s.decode_ms <= wall_ms
        assert s.tokens_per_s > 0
    finally:
        engine.close()


async def test_cached_prefixes_are_shared_only_within_a_tenant(engine):
    system = "You are a coding agent with a secret plan. " * 20
    mine = prompt(engine, "first task", system=system)
    await collect(engine.generate(GenerateRequest(prompt=mine, max_tokens=100, tenant="alice")))
    probe = engine.generate(
        GenerateRequest(prompt=prompt(engine, "probe", system=system), max_tokens=5, tenant="eve")
    )
    await collect(probe)
    assert probe.stats.cached_tokens == 0  # eve learns nothing of alice's prompt
    again = engine.generate(
        GenerateRequest(prompt=prompt(engine, "next", system=system), max_tokens=5, tenant="alice")
    )
    await collect(again)
    assert again.stats.cached_tokens > len(system)  # alice still shares her own prefix


async def test_a_request_that_breaks_admission_fails_alone(engine):
    place = engine.slots.place

    def picky(prompt_tokens, *args, **kwargs):
        if bytes(t for t in prompt_tokens if t < 256).find(b"poison") >= 0:
            raise RuntimeError("bad placement")
        return place(prompt_tokens, *args, **kwargs)

    engine.slots.place = picky
    bad = engine.generate(GenerateRequest(prompt=prompt(engine, "poison"), max_tokens=20))
    good = engine.generate(GenerateRequest(prompt=prompt(engine, "fine"), max_tokens=20))
    assert text(await collect(good)) == "echo: fine"
    await collect(bad)
    assert bad.stats.finish_reason == "error" and "bad placement" in bad.stats.error
    assert engine.status()["slots_busy"] == 0


async def test_a_worker_failure_outside_a_step_fails_the_jobs_in_flight_and_the_engine_goes_on():
    engine = fake_engine(lambda c: "x" * 500, step_s=0.005)
    try:
        drop = engine._drop_cancelled
        calls = {"n": 0}

        def flaky() -> None:
            calls["n"] += 1
            if calls["n"] == 20:
                raise RuntimeError("bug in the loop")
            drop()

        engine._drop_cancelled = flaky
        running = engine.generate(
            GenerateRequest(prompt=prompt(engine, "go"), max_tokens=400, speculation=False)
        )
        await asyncio.wait_for(collect(running), timeout=5)  # it ends: no stream waits forever
        assert running.stats.finish_reason == "error" and "bug in the loop" in running.stats.error
        assert engine.status()["worker_restarts"] == 1 and engine.status()["worker_alive"] == 1
        after = engine.generate(GenerateRequest(prompt=prompt(engine, "again"), max_tokens=3))
        assert text(await collect(after)) == "xxx"
    finally:
        engine.close()


class _ThreadKiller(BaseException):
    """Escapes every `except Exception`: the worker thread dies of it."""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
async def test_a_dead_worker_is_reported_and_restarted():
    engine = fake_engine(lambda c: "x" * 500, step_s=0.005)
    try:
        step = engine._step
        calls = {"n": 0}

        def deadly() -> None:
            calls["n"] += 1
            if calls["n"] == 5:
                raise _ThreadKiller()
            step()

        engine._step = deadly
        running = engine.generate(
            GenerateRequest(prompt=prompt(engine, "go"), max_tokens=400, speculation=False)
        )
        deadline = time.monotonic() + 5
        while engine.alive and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        status = engine.status()  # reports the dead worker, then restarts it
        assert status["worker_alive"] == 0
        await asyncio.wait_for(collect(running), timeout=5)
        assert running.stats.finish_reason == "error"
        assert engine.status()["worker_alive"] == 1
        after = engine.generate(GenerateRequest(prompt=prompt(engine, "again"), max_tokens=3))
        assert text(await asyncio.wait_for(collect(after), timeout=5)) == "xxx"
    finally:
        engine.close()


async def timed(stream) -> tuple[float, float]:
    """When a stream's first token came, and when it ended (loop time)."""
    first = None
    async for _chunk in stream:
        first = first if first is not None else asyncio.get_running_loop().time()
    return first, asyncio.get_running_loop().time()


@pytest.mark.parametrize("cap", [1, None])
async def test_one_key_cannot_take_every_slot_while_another_waits(engine, cap):
    # Key A sends two requests and key B one; plenty of slots. Capped at one slot per key, A's
    # second waits for its first while B starts at once; uncapped, A's two run side by side.
    engine.max_slots_per_tenant = cap
    long = "x " * 60

    def ask(tenant: str, i: int):
        request = GenerateRequest(prompt=prompt(engine, f"{tenant}{i} {long}"), max_tokens=300, tenant=tenant)
        return engine.generate(request)

    (a1_first, a1_done), (a2_first, _), (b1_first, _) = await asyncio.gather(
        timed(ask("a", 1)), timed(ask("a", 2)), timed(ask("b", 1))
    )
    assert b1_first < a1_done
    if cap == 1:
        assert a2_first >= a1_done
    else:
        assert a2_first < a1_done


async def test_requests_without_a_key_are_never_capped(engine):
    engine.max_slots_per_tenant = 1
    streams = [engine.generate(GenerateRequest(prompt=prompt(engine, f"q{i} " + "y " * 60), max_tokens=300))
               for i in range(2)]  # fmt: skip
    (first1, done1), (first2, _) = await asyncio.gather(*(timed(s) for s in streams))
    assert first2 < done1


def test_a_reply_whose_event_loop_closed_stops_without_failing_the_worker(caplog):
    # A program that ends mid-reply (a bench stopped at its budget) closes the loop reading it;
    # the worker used to crash on its next token and restart. Now the job just stops.
    engine = fake_engine(lambda conv: "z" * 5000 if "go" in last_user_message(conv) else "ok", step_s=0.005)
    try:

        async def leave_mid_reply() -> None:
            stream = engine.generate(
                GenerateRequest(prompt=prompt(engine, "go"), max_tokens=5000, speculation=False)
            )
            async for _ in stream:
                break

        asyncio.run(leave_mid_reply())
        time.sleep(0.1)  # the worker steps on, with nobody listening

        async def next_reply() -> str:
            return text(
                await collect(engine.generate(GenerateRequest(prompt=prompt(engine, "hi"), max_tokens=10)))
            )

        assert asyncio.run(next_reply()) == "ok"
        assert "Event loop is closed" not in caplog.text
    finally:
        engine.close()
