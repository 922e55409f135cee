"""The prefix cache on disk, over the fake runtime: a restarted engine skips the prefill of a long
prompt it saw before, the folder stays within its bound, and a damaged or foreign entry is never
restored. The real-model test (tests/integration/test_prefix_cache_real.py) covers llama.cpp's
own state format and checks the output is identical."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from whiz.chat.messages import Message
from whiz.chat.template import ChatTemplate
from whiz.engine import kv_file
from whiz.engine.fake import FakeRuntime, fake_engine
from whiz.engine.prefix_cache import PrefixCache
from whiz.engine.types import GenerateRequest

FAKE = {"model": "fake", "weights": "a"}
SYSTEM = "You are a careful coding agent. " * 40  # ~1.3k tokens, one per byte


def prompt(engine, user: str, system: str = SYSTEM) -> list[int]:
    return ChatTemplate(engine.tokenizer).encode([Message("system", system), Message("user", user)])


async def run(engine, tokens: list[int], max_tokens: int = 40):
    stream = engine.generate(GenerateRequest(prompt=tokens, max_tokens=max_tokens))
    out = [t async for chunk in stream for t in chunk.tokens]
    return out, stream.stats


def cache(directory: Path, identity: dict = FAKE, **kw) -> PrefixCache:
    return PrefixCache(directory, identity, min_tokens=256, **kw)


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*" + kv_file.SUFFIX))


async def first_life(directory: Path, *users: str, identity: dict = FAKE, **kw) -> list[list[int]]:
    """Run prompts in one engine, then close it (as a server restart does)."""
    engine = fake_engine(prefix_cache=cache(directory, identity, **kw))
    try:
        return [(await run(engine, prompt(engine, u)))[0] for u in users]
    finally:
        engine.close()


async def test_a_restarted_engine_restores_a_long_prompt_instead_of_prefilling_it(tmp_path):
    [before] = await first_life(tmp_path, "rename foo to bar")
    assert len(entries(tmp_path)) == 1

    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        tokens = prompt(engine, "rename foo to bar")
        after, stats = await run(engine, tokens)
        assert after == before
        # All but the last prompt token (decoded again for its logits) came from disk.
        assert stats.cached_tokens == len(tokens) - 1
        assert stats.prefill_tokens == 1
        assert engine.status()["prefix_cache_restores"] == 1
    finally:
        engine.close()


async def test_a_prompt_sharing_only_the_system_prompt_restores_that_much(tmp_path):
    await first_life(tmp_path, "rename foo to bar")
    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        tokens = prompt(engine, "now something else entirely")
        out, stats = await run(engine, tokens)
        assert bytes(out).decode() == "echo: now something else entirely"[:40]
        shared = len(prompt(engine, "")) - len("<|im_end|>\n<|im_start|>assistant\n") - 1
        assert shared <= stats.cached_tokens < len(tokens) - 1
        assert stats.prefill_tokens == len(tokens) - stats.cached_tokens
    finally:
        engine.close()


async def test_a_memory_cached_prefix_is_not_read_from_disk_again(tmp_path):
    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        await run(engine, prompt(engine, "first"))
        engine.prefix_cache.flush()  # the entry is written
        engine.prefix_cache = cache(tmp_path)
        _, stats = await run(engine, prompt(engine, "second"))
        assert stats.cached_tokens > 1000  # shared from the slot in memory
        assert engine.status()["prefix_cache_restores"] == 0
    finally:
        engine.close()


async def test_short_prompts_and_prompts_the_disk_already_holds_are_not_saved(tmp_path):
    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        await run(engine, prompt(engine, "hi", system="short"))
        await run(engine, prompt(engine, "one"))
        await run(engine, prompt(engine, "two"))  # adds a few tokens to what "one" saved
    finally:
        engine.close()
    assert len(entries(tmp_path)) == 1


async def test_the_folder_stays_within_its_bound_least_recently_used_out(tmp_path):
    systems = {name: f"the {name} system prompt. " * 60 for name in ("first", "second", "third")}
    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        await run(engine, prompt(engine, "go", system=systems["first"]))
    finally:
        engine.close()
    bound = int(2.5 * entries(tmp_path)[0].stat().st_size)  # room for two entries
    engine = fake_engine(prefix_cache=cache(tmp_path, max_bytes=bound))
    try:
        await run(engine, prompt(engine, "go", system=systems["second"]))
    finally:
        engine.close()

    # After a restart the first is restored, so the second is now the least recently used.
    engine = fake_engine(prefix_cache=cache(tmp_path, max_bytes=bound))
    try:
        _, stats = await run(engine, prompt(engine, "go", system=systems["first"]))
        assert stats.cached_tokens > 1000
        await run(engine, prompt(engine, "go", system=systems["third"]))
    finally:
        engine.close()
    files = entries(tmp_path)
    assert sum(f.stat().st_size for f in files) <= bound
    texts = [b"".join(map(engine.tokenizer.piece, kv_file.read_header(f).tokens.tolist())) for f in files]
    assert sorted(t.split(b"the ")[1].split(b" ")[0] for t in texts) == [b"first", b"third"]


async def test_no_entry_is_written_when_the_disk_is_nearly_full(tmp_path, monkeypatch):
    import shutil

    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=512 * 2**20))
    await first_life(tmp_path, "rename foo to bar")
    assert entries(tmp_path) == []


@pytest.mark.parametrize("damage", ["flip a state byte", "truncate", "flip a token"])
async def test_a_damaged_entry_is_discarded_with_a_log_line_and_never_restored(tmp_path, caplog, damage):
    [before] = await first_life(tmp_path, "rename foo to bar")
    [path] = entries(tmp_path)
    raw = bytearray(path.read_bytes())
    if damage == "flip a state byte":
        raw[-3] ^= 0xFF
    elif damage == "truncate":
        raw = raw[: len(raw) - 100]
    else:
        raw[kv_file.read_header(path).data_offset - 8] ^= 0x01
    path.write_bytes(raw)

    caplog.set_level(logging.WARNING, logger="whiz.prefix_cache")
    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        tokens = prompt(engine, "rename foo to bar")
        after, stats = await run(engine, tokens)
        assert after == before
        assert stats.cached_tokens == 0
        assert engine.runtime.restored_tokens == 0
    finally:
        engine.close()
    assert "discarding" in caplog.text
    # Replaced by a sound entry from the prefill that followed.
    [again] = entries(tmp_path)
    kv_file.read_data(again, kv_file.read_header(again))


async def test_another_models_or_builds_entries_are_never_restored(tmp_path):
    await first_life(tmp_path, "rename foo to bar", identity={**FAKE, "weights": "b"})
    [theirs] = entries(tmp_path)
    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        _, stats = await run(engine, prompt(engine, "rename foo to bar"))
        assert stats.cached_tokens == 0
        assert engine.runtime.restored_tokens == 0
    finally:
        engine.close()
    assert theirs.exists()  # the other engine's to use; only the size bound removes it
    assert len(entries(tmp_path)) == 2


async def test_a_foreign_entry_under_this_engines_name_is_discarded(tmp_path, caplog):
    await first_life(tmp_path, "rename foo to bar", identity={**FAKE, "weights": "b"})
    [theirs] = entries(tmp_path)
    mine = cache(tmp_path).fingerprint
    theirs.rename(tmp_path / (mine + theirs.name[theirs.name.index("-") :]))
    caplog.set_level(logging.WARNING, logger="whiz.prefix_cache")
    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        _, stats = await run(engine, prompt(engine, "rename foo to bar"))
        assert stats.cached_tokens == 0
    finally:
        engine.close()
    assert "another model, build or cache layout" in caplog.text


def test_serve_settings_choose_the_folder_or_turn_it_off(tmp_path, monkeypatch):
    from whiz.config import load_settings
    from whiz.engine.factory import load_engine

    engine = load_engine(load_settings(model="fake", prefix_cache_dir=tmp_path / "kv", prefix_cache_gb=0.5))
    try:
        assert engine.prefix_cache.dir == tmp_path / "kv"
        assert engine.prefix_cache.max_bytes == 2**29
    finally:
        engine.close()
    monkeypatch.setenv("WHIZ_PREFIX_CACHE", "0")
    engine = load_engine(load_settings(model="fake", prefix_cache_dir=tmp_path / "kv"))
    try:
        assert engine.prefix_cache is None
    finally:
        engine.close()


def test_one_tenants_entries_are_never_offered_to_another(tmp_path):
    runtime = FakeRuntime()
    tokens = runtime.tokenizer.encode(SYSTEM)
    runtime.decode([(t, i, 0, False) for i, t in enumerate(tokens)])
    c = cache(tmp_path)
    try:
        c.prompt_prefilled(runtime, 0, tokens, tenant="key-a")
        c.flush()
        assert c.longest(tokens, tenant="key-a")[1] == len(tokens)
        assert c.longest(tokens, tenant="key-b") is None
        assert c.longest(tokens) is None
    finally:
        c.close()
    assert b"key-a" not in entries(tmp_path)[0].read_bytes()  # a hash of it, never the key


async def test_a_restore_waits_for_its_read_while_other_sessions_keep_decoding(tmp_path):
    [before] = await first_life(tmp_path, "rename foo to bar")
    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        other = prompt(engine, "x" * 200, system="other")
        busy = engine.generate(GenerateRequest(prompt=other, max_tokens=150))
        tokens = prompt(engine, "rename foo to bar")
        after, stats = await run(engine, tokens)
        busy_tokens = [t async for chunk in busy for t in chunk.tokens]
        assert after == before and stats.cached_tokens == len(tokens) - 1
        assert bytes(busy_tokens).decode() == ("echo: " + "x" * 200)[:150]
    finally:
        engine.close()


async def test_after_a_restart_only_the_tenant_that_saved_a_prefix_gets_it_restored(tmp_path):
    async def ask(engine, tenant: str):
        request = GenerateRequest(prompt=prompt(engine, "rename foo to bar"), max_tokens=10, tenant=tenant)
        stream = engine.generate(request)
        _ = [t async for chunk in stream for t in chunk.tokens]
        return stream.stats

    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        await ask(engine, "key-a")
    finally:
        engine.close()
    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        assert (await ask(engine, "key-b")).cached_tokens == 0
    finally:
        engine.close()
    engine = fake_engine(prefix_cache=cache(tmp_path))
    try:
        assert (await ask(engine, "key-a")).cached_tokens > 1000
    finally:
        engine.close()


def steps(n: int, size: int) -> list[bytes]:
    """Text a conversation adds, step by step: distinct bytes, so no step repeats another."""
    return [(f"<step {k}> " * size).encode()[:size] for k in range(n)]


async def prefill(engine, tokens: list[int]):
    """One request over `tokens` (its prompt is prefilled, so the cache may save it)."""
    return (await run(engine, tokens, max_tokens=1))[1]


async def test_an_agents_next_request_is_restored_whole_after_a_restart(tmp_path):
    # Codex's case: a warm-up over its instructions and tools, then the turn adds ~700 tokens.
    warm_up = list(SYSTEM.encode())
    turn = warm_up + list(steps(1, 700)[0])
    engine = fake_engine(prefix_cache=PrefixCache(tmp_path, FAKE, min_tokens=1024))
    try:
        await prefill(engine, warm_up)
        await prefill(engine, turn)
        await prefill(engine, turn + list(b"a few more tokens"))  # too few to be worth a file
    finally:
        engine.close()
    assert len(entries(tmp_path)) == 2

    engine = fake_engine(prefix_cache=PrefixCache(tmp_path, FAKE, min_tokens=1024))
    try:
        stats = await prefill(engine, turn)
        assert stats.cached_tokens == len(turn) - 1  # not only the warm-up's share
    finally:
        engine.close()


async def test_a_conversation_growing_in_short_steps_keeps_few_files(tmp_path):
    tokens = list(SYSTEM.encode())
    engine = fake_engine(prefix_cache=PrefixCache(tmp_path, FAKE, min_tokens=1024), n_ctx=16384)
    try:
        await prefill(engine, tokens)
        for step in steps(13, 300):  # 3,900 tokens in steps of 300
            tokens += list(step)
            await prefill(engine, tokens)
    finally:
        engine.close()
    lengths = sorted(len(kv_file.read_header(f).tokens) for f in entries(tmp_path))
    # One file per 1,024 tokens of growth or more, and the tip: not one per step.
    assert len(lengths) <= 1 + 3900 // 1024 + 1
    assert lengths[-1] == len(tokens)
    assert all(b - a >= 1024 for a, b in zip(lengths, lengths[1:-1], strict=False))

    engine = fake_engine(prefix_cache=PrefixCache(tmp_path, FAKE, min_tokens=1024), n_ctx=16384)
    try:
        stats = await prefill(engine, tokens)
        assert stats.cached_tokens == len(tokens) - 1
    finally:
        engine.close()
