"""Building the engine `whiz serve` runs: the fake one for tests, or llama.cpp with a real model."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from whiz.config import EngineSettings, ServeSettings
from whiz.engine.draft_model import DraftModel, check_compatible
from whiz.engine.prefix_cache import GB, PrefixCache
from whiz.engine.scheduler import Scheduler
from whiz.engine.types import EngineInfo
from whiz.errors import EngineError

log = logging.getLogger("whiz.engine")


def load_engine(settings: ServeSettings, *, progress=None) -> Scheduler:
    """The engine for `settings.model`: 'fake', a registry name, a .gguf path or an hf: ref.

    With `settings.draft_model`, a second, smaller model drafts tokens for it.
    """
    if settings.model == "fake":
        from whiz.engine.fake import fake_engine

        if settings.draft_model not in (None, "fake"):
            raise EngineError("the fake model drafts only with the fake draft model: --draft-model fake")
        n_ctx = settings.ctx or 8192
        engine = fake_engine(
            n_ctx=n_ctx,
            n_seq_max=min(settings.slots, 8),
            draft_miss_every=8 if settings.draft_model else None,
            prefix_cache=disk_prefix_cache(settings, None, {}, n_ctx),
        )
        engine.speculation = settings.speculation
        engine.max_slots_per_tenant = slots_per_key(settings, len(engine.slots.slots))
        return engine
    if settings.draft_model == "fake":
        raise EngineError("the fake draft model drafts only for the fake model (--model fake)")

    from whiz.engine.llamacpp import LlamaRuntime
    from whiz.models import ModelNotInstalledError, ModelStore, default_home

    store = ModelStore(default_home())
    # Check both names before pulling either: a typo in one must not cost a download of the other.
    for ref in filter(None, (settings.model, settings.draft_model)):
        with contextlib.suppress(ModelNotInstalledError):
            store.resolve(ref, pull=False)
    path = store.resolve(settings.model)
    draft_path = store.resolve(settings.draft_model) if settings.draft_model else None
    runtime = LlamaRuntime(
        path,
        kv_budget_mb=settings.kv_budget_mb,
        ctx=settings.ctx,
        n_seq_max=settings.slots,
        n_threads=settings.threads,
        threads_follow_load=settings.threads_follow_load,
    )
    speculation = settings.speculation
    if speculation and not runtime.batch_invariant:
        # Exactness first: speculative output must be what plain decoding writes.
        speculation = False
        if progress is not None:
            progress(
                "this llama.cpp build computes a token differently alone and in a batch, so "
                "speculation is off (output stays exact); `make setup` builds one that does not"
            )
    draft = None
    if draft_path is not None:
        # One draft sequence per slot, as long as the slot's: the budget bought the slots already.
        small = LlamaRuntime(
            draft_path,
            kv_budget_mb=None,
            ctx=runtime.ctx_per_conversation,
            n_seq_max=runtime.n_seq_max,
            n_threads=settings.threads,
            exact=False,
            threads_follow_load=settings.threads_follow_load,
        )
        try:
            check_compatible(runtime, small)
        except EngineError:
            small.close()
            runtime.close()
            raise
        draft = DraftModel(small, name=settings.draft_model)
    info = EngineInfo(
        model=settings.model_name or settings.model,
        n_ctx=runtime.ctx_per_conversation,
        n_ctx_train=runtime.n_ctx_train,
        n_seq_max=runtime.n_seq_max,
    )
    prefix_cache = None
    if settings.prefix_cache:
        prefix_cache = disk_prefix_cache(settings, path, runtime.kv_layout, runtime.ctx_per_conversation)
    return Scheduler(
        runtime,
        info,
        speculation=speculation,
        max_draft=settings.max_draft,
        draft_model=draft,
        prefix_cache=prefix_cache,
        max_slots_per_tenant=slots_per_key(settings, runtime.n_seq_max),
    )


def slots_per_key(settings: EngineSettings, slots: int) -> int:
    """The cap on one key's slots: the setting, or half the slots (rounded up), so that one client
    (one key) filling every slot cannot starve the others. Only requests with a key are capped."""
    return settings.max_slots_per_key or max(1, (slots + 1) // 2)


def disk_prefix_cache(
    settings: EngineSettings, model_path: Path | None, kv_layout: dict, max_entry_tokens: int
) -> PrefixCache | None:
    """The on-disk prefix cache `settings` ask for, keyed to this model file, build and cache layout.

    The fake model keeps one only in a folder named by --prefix-cache-dir: tests and `--model fake`
    demos must not write into the user's cache.
    """
    if not settings.prefix_cache or (model_path is None and settings.prefix_cache_dir is None):
        return None
    from whiz.models import default_home

    directory = settings.prefix_cache_dir or default_home() / "kv"
    try:
        if model_path is None:
            identity = {"model": "fake"}
        else:
            from whiz.engine.kv_identity import llama_build, model_sha256

            identity = {
                "model_sha256": model_sha256(model_path, directory / "model-hashes.json"),
                "engine": llama_build(),
                **kv_layout,
            }
        return PrefixCache(
            directory,
            identity,
            max_bytes=int(settings.prefix_cache_gb * GB),
            min_tokens=settings.prefix_cache_min_tokens,
            max_entry_tokens=max_entry_tokens,
        )
    except OSError as exc:
        # A cache folder we can't use costs speed after restarts, nothing else.
        log.warning("prefix cache off: %s", exc)
        return None
