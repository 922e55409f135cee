"""Building the engine `whiz serve` runs: the fake one for tests, or llama.cpp with a real model."""

from __future__ import annotations

from whiz.config import ServeSettings
from whiz.engine.scheduler import Scheduler
from whiz.engine.types import EngineInfo


def load_engine(settings: ServeSettings, *, progress=None) -> Scheduler:
    """The engine for `settings.model`: 'fake', a registry name, a .gguf path or an hf: ref."""
    if settings.model == "fake":
        from whiz.engine.fake import fake_engine

        engine = fake_engine(n_ctx=settings.ctx or 8192, n_seq_max=min(settings.slots, 8))
        engine.speculation = settings.speculation
        return engine

    from whiz.engine.llamacpp import LlamaRuntime
    from whiz.models import ModelStore, default_home

    path = ModelStore(default_home()).resolve(settings.model)
    runtime = LlamaRuntime(
        path,
        kv_budget_mb=settings.kv_budget_mb,
        ctx=settings.ctx,
        n_seq_max=settings.slots,
        n_threads=settings.threads,
    )
    info = EngineInfo(
        model=settings.model_name or settings.model,
        n_ctx=runtime.ctx_per_conversation,
        n_ctx_train=runtime.n_ctx_train,
        n_seq_max=runtime.n_seq_max,
    )
    return Scheduler(runtime, info, speculation=settings.speculation, max_draft=settings.max_draft)
