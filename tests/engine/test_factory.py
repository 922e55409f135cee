"""load_engine: exact output on a llama.cpp build whose batches sum differently, and its per-key cap."""

from __future__ import annotations

import whiz.engine.llamacpp as llamacpp
import whiz.models
from whiz.config import ServeSettings
from whiz.engine.factory import load_engine
from whiz.engine.fake import FakeRuntime


class DriftingRuntime(FakeRuntime):
    """A real-shaped runtime whose self-check found batch-dependent sums (a stock build)."""

    batch_invariant = False
    n_ctx_train = 32768

    def __init__(self, path, **kwargs):
        super().__init__()
        self.ctx_per_conversation = self.n_ctx


def test_speculation_is_turned_off_and_said_when_batches_change_the_output(monkeypatch, tmp_path):
    monkeypatch.setattr(llamacpp, "LlamaRuntime", DriftingRuntime)
    monkeypatch.setattr(whiz.models.ModelStore, "resolve", lambda self, ref, pull=True: tmp_path / "m.gguf")
    notes: list[str] = []
    engine = load_engine(ServeSettings(model="qwen2.5-coder-0.5b", prefix_cache=False), progress=notes.append)
    try:
        assert engine.speculation is False
        assert len(notes) == 1 and "speculation is off" in notes[0] and "make setup" in notes[0]
    finally:
        engine.close()


def test_an_invariant_build_keeps_speculation_on(monkeypatch, tmp_path):
    class ExactRuntime(DriftingRuntime):
        batch_invariant = True

    monkeypatch.setattr(llamacpp, "LlamaRuntime", ExactRuntime)
    monkeypatch.setattr(whiz.models.ModelStore, "resolve", lambda self, ref, pull=True: tmp_path / "m.gguf")
    notes: list[str] = []
    engine = load_engine(ServeSettings(model="qwen2.5-coder-0.5b", prefix_cache=False), progress=notes.append)
    try:
        assert engine.speculation is True and notes == []
    finally:
        engine.close()


def test_one_keys_slots_are_capped_at_half_unless_set():
    engine = load_engine(ServeSettings(model="fake", slots=8))
    try:
        assert engine.max_slots_per_tenant == 4
    finally:
        engine.close()
    engine = load_engine(ServeSettings(model="fake", slots=8, max_slots_per_key=2))
    try:
        assert engine.max_slots_per_tenant == 2
    finally:
        engine.close()
