"""The llama.cpp runtime, through llama-cpp-python's low-level (ctypes) API.

One model, one context with a unified KV cache shared by `n_seq_max` sequences, one reusable
batch. The high-level `Llama` class wraps a single sequence, so it can't serve several sessions,
share prefixes or verify drafts; this module talks to `llama_decode` and the memory API directly.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from whiz.engine.batch_timing import time_batches
from whiz.engine.compute_thread import compute_thread
from whiz.engine.speculative import BatchCost, DraftLength
from whiz.engine.threads import ThreadGovernor
from whiz.errors import EngineError, KVCacheFull

# Batch invariance: ggml's tiled K-quant matmul takes over from 8 rows and sums in another order
# than the one-row path, so the same token could get different logits alone and in a batch of
# drafts. Off, every row is computed the same way whatever the batch (see scripts/llama_patch.py
# and llama_cmake_args.py for the build-time half). ggml reads this once, on the first matmul.
os.environ.setdefault("GGML_CPU_TILED_MM", "0")
# Repacked weights (q4_K interleaved 8 rows at a time, as llama.cpp's `Llama` runs them) are about
# a quarter cheaper per decoded token; whiz's build has an exact batch kernel for them, on where
# GGML_WHIZ_EXACT=1 (scripts/llama_patch.py, docs/engine-bench.md): whiz sets it unless the
# caller did (GGML_WHIZ_EXACT=0 keeps weights plain). llama.cpp reads it once, at the first load.
REPACK = os.environ.setdefault("GGML_WHIZ_EXACT", "1") == "1"


class _LlamaLog:
    """llama.cpp's logger, quiet: it prints every tensor and harmless warnings while loading.

    Failures reach us as return codes, which become clear errors; WHIZ_LLAMA_LOG=1 shows the log.
    `capture()` collects what llama.cpp writes meanwhile (how a model's weights were laid out).
    llama.cpp's logger is process-wide and outlives any one runtime, so one of these is kept on
    the llama_cpp module, set once: owned by a runtime, its callback was freed with it, and the
    next model load in the process (another engine, a vocabulary-only load) called freed memory
    and crashed.
    """

    def __init__(self, llama_cpp):
        self._verbose = os.environ.get("WHIZ_LLAMA_LOG") == "1"
        self._lines: list[str] | None = None

        @llama_cpp.llama_log_callback
        def callback(level, text, user_data):
            line = text.decode(errors="replace")
            if self._lines is not None:
                self._lines.append(line)
            if self._verbose:
                sys.stderr.write(line)

        self._callback = callback
        llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))

    @classmethod
    def of(cls, llama_cpp) -> _LlamaLog:
        kept = getattr(llama_cpp, "_whiz_quiet_log", None)
        if not isinstance(kept, cls):
            kept = llama_cpp._whiz_quiet_log = cls(llama_cpp)
        return kept

    @contextmanager
    def capture(self) -> Iterator[list[str]]:
        self._lines = lines = []
        try:
            yield lines
        finally:
            self._lines = None


def _repacked_mib(log: str) -> float:
    """The size of the weights llama.cpp loaded repacked ("CPU_REPACK"), from its load log."""
    found = re.search(r"CPU_REPACK model buffer size\s*=\s*([0-9.]+) MiB", log)
    return float(found.group(1)) if found else 0.0


class LlamaTokenizer:
    """The model's own tokenizer (BPE for Qwen), with special tokens parsed in text."""

    def __init__(self, llama_cpp, vocab):
        self._ll = llama_cpp
        self._vocab = vocab
        self._buf = ctypes.create_string_buffer(256)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        self._pieces: dict[int, bytes] = {}

    def encode(self, text: str) -> list[int]:
        data = text.encode()
        n_max = len(data) + 16
        out = (self._ll.llama_token * n_max)()
        n = self._ll.llama_tokenize(self._vocab, data, len(data), out, n_max, False, True)
        if n < 0:
            out = (self._ll.llama_token * -n)()
            n = self._ll.llama_tokenize(self._vocab, data, len(data), out, -n, False, True)
        return list(out[:n])

    def piece(self, token: int) -> bytes:
        cached = self._pieces.get(token)
        if cached is None:
            n = self._ll.llama_token_to_piece(self._vocab, token, self._buf, len(self._buf), 0, True)
            cached = self._buf.raw[: max(n, 0)]
            self._pieces[token] = cached
        return cached

    def is_eog(self, token: int) -> bool:
        return bool(self._ll.llama_vocab_is_eog(self._vocab, token))


_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
"""llama_token_data, so a candidate array is one numpy buffer llama.cpp reads in place."""


class LlamaGrammarMatcher:
    """A `GrammarMatcher` over llama.cpp's grammar sampler (its GBNF parser and matcher)."""

    def __init__(self, llama_cpp, vocab, gbnf: str, root: str):
        self._ll = llama_cpp
        self._smpl = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), root.encode())
        if not self._smpl:
            raise EngineError(f"llama.cpp could not read the grammar (root {root!r})")
        self._eos = llama_cpp.llama_vocab_eos(vocab)

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        data = np.zeros(len(ids), dtype=_TOKEN_DATA)
        data["id"] = ids
        array = self._ll.llama_token_data_array(
            data=data.ctypes.data_as(self._ll.llama_token_data_p), size=len(ids), selected=-1, sorted=False
        )
        # The grammar sampler only sets the logit of each token it forbids to -inf.
        self._ll.llama_sampler_apply(self._smpl, ctypes.byref(array))
        return np.isfinite(data["logit"])

    def accept(self, token: int) -> None:
        self._ll.llama_sampler_accept(self._smpl, token)

    def can_end(self) -> bool:
        return bool(self.allowed(np.array([self._eos]))[0])

    def __del__(self) -> None:
        if getattr(self, "_smpl", None):
            self._ll.llama_sampler_free(self._smpl)
            self._smpl = None


def vocabulary_matchers(model_path: str):
    """Run in the grammar process (`grammar_process.py`): the model file's vocabulary alone, read
    once, no weights, and a builder of llama.cpp grammar matchers over it."""
    import llama_cpp

    _LlamaLog.of(llama_cpp)
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(model_path.encode(), params)
    if not model:
        raise EngineError(f"llama.cpp could not read the vocabulary of {model_path}")
    vocab = llama_cpp.llama_model_get_vocab(model)

    def build(gbnf: str, root: str) -> LlamaGrammarMatcher:
        return LlamaGrammarMatcher(llama_cpp, vocab, gbnf, root)

    return build


class LlamaRuntime:
    """A `Runtime` over a GGUF model file."""

    shared_cache = False  # one KV stream per sequence: a full stream can't borrow from others

    def __init__(
        self,
        model_path: Path,
        *,
        kv_budget_mb: int | None = 2048,
        ctx: int | None = None,
        n_seq_max: int = 8,
        n_threads: int | None = None,
        n_batch: int = 512,
        n_ubatch: int = 256,
        exact: bool = True,
        threads_follow_load: bool = True,
    ):
        """Load the model and make a context.

        `kv_budget_mb` buys as many sequences of `ctx` tokens as fit (at least 2, at most
        `n_seq_max`); None gives exactly `n_seq_max` of them. `exact=False` allows llama.cpp's own
        repacked weights where whiz's exact ones are off (`REPACK`): faster, but their sums depend
        on the batch; fine for a draft model, whose guesses are checked anyway, never for a model
        whose output must not depend on speculation. `threads_follow_load` gives a decode fewer
        threads than `n_threads` while other programs keep cores busy (whiz.engine.threads).
        """
        import llama_cpp  # imported here so that the fake engine and the CLI need no native library

        self._ll = llama_cpp
        self._log = _LlamaLog.of(llama_cpp)
        # Every decode on one thread, whichever thread asks (see compute_thread.py): decoding on
        # two threads made each later token sleep at every one of llama.cpp's barriers.
        self._compute = compute_thread(llama_cpp)
        llama_cpp.llama_backend_init()
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0
        # Repacked weights with GGML_WHIZ_EXACT (above): whiz's build then repacks only what it
        # sums exactly; a build without the patch shows up in `batch_invariant` below.
        mparams.use_extra_bufts = REPACK or not exact
        with self._log.capture() as log:
            self._model = llama_cpp.llama_model_load_from_file(str(model_path).encode(), mparams)
        # Where whiz's build has the exact kernel for them (AVX2 with FMA and F16C, or AVX-512
        # VNNI), the q4_K weights.
        self.repacked_mib = _repacked_mib("".join(log))
        if not self._model:
            raise EngineError(f"llama.cpp could not load the model file {model_path}")
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.grammar_spec = functools.partial(vocabulary_matchers, str(model_path))
        """How the grammar process builds matchers over this vocabulary (grammar_process.py)."""
        self.tokenizer = LlamaTokenizer(llama_cpp, self._vocab)
        self.n_vocab = self.tokenizer.n_vocab
        self.n_ctx_train = llama_cpp.llama_model_n_ctx_train(self._model)
        # One KV stream per sequence (not a unified cache): in a unified cache every batch attends
        # over the cells of every idle session too, which made a warm turn at 4k tokens of history
        # 3x slower than one at 0 and cut decode speed by a third once a few sessions were warm.
        # The memory budget buys slots of `ctx` tokens each.
        n_layer = llama_cpp.llama_model_n_layer(self._model)
        n_head = llama_cpp.llama_model_n_head(self._model)
        n_head_kv = llama_cpp.llama_model_n_head_kv(self._model)
        head_dim = llama_cpp.llama_model_n_embd(self._model) // max(n_head, 1)
        self.kv_bytes_per_token = 2 * n_layer * n_head_kv * head_dim * 2  # K and V, f16
        if kv_budget_mb is None:
            per_seq = ctx or self.n_ctx_train
        else:
            budget_cells = kv_budget_mb * 1024 * 1024 // self.kv_bytes_per_token
            per_seq = min(ctx or self.n_ctx_train, max(budget_cells // 2, 512))
            n_seq_max = max(2, min(n_seq_max, budget_cells // per_seq))
        n_ctx = per_seq * n_seq_max
        threads = n_threads or os.cpu_count() or 2
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_ubatch
        cparams.n_seq_max = n_seq_max
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        self._governor = ThreadGovernor(threads) if threads_follow_load else None
        self.threads_now = threads
        cparams.kv_unified = False
        # Flash attention off, f16 cache: measured fastest here at long contexts (FA made a
        # 30-token batch at 4.8k tokens of history 2x slower; a q8_0 or f32 cache was slower too).
        cparams.flash_attn_type = 0
        cparams.no_perf = True
        self._ctx = llama_cpp.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            raise EngineError(f"llama.cpp could not create a context of {n_ctx} tokens (out of memory?)")
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self.can_shift = bool(llama_cpp.llama_memory_can_shift(self._mem))
        self.n_ctx = llama_cpp.llama_n_ctx(self._ctx)
        self.ctx_per_conversation = llama_cpp.llama_n_ctx_seq(self._ctx)
        self.n_seq_max = llama_cpp.llama_n_seq_max(self._ctx)
        self.n_batch = n_batch
        # What a saved sequence state depends on besides the model and the build: the stream count
        # is part of its bytes (llama.cpp refuses a state from a context with other n_seq_max), and
        # llama.cpp's own repacked kernels would have computed other cells (whiz's compute the same).
        self.kv_layout = {"type_k": "f16", "type_v": "f16", "flash_attn": False, "n_seq_max": self.n_seq_max}
        self.kv_layout["exact"] = exact
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self.batch_costs_ms, self.batch_invariant = self._time_batches()

    def _time_batches(self) -> tuple[dict[int, float], bool]:
        """Time batches of a few sizes (about a second), for choosing draft lengths (batch_timing.py).

        Each batch's first row is the same token at the same position, so the timings also tell
        whether a row's logits are the same alone and in a batch: a llama.cpp built another way
        (a stock wheel, a GPU build) may sum them differently, and then speculation would change
        the output.
        """
        first_rows: list[np.ndarray] = []
        seq = self.n_seq_max - 1
        self.decode([(0, i, seq, False) for i in range(64)])  # a context to attend over, and a warm-up

        def run(n: int) -> None:
            logits = self.decode([(0, 64 + i, seq, True) for i in range(n)])
            first_rows.append(np.array(logits[0]))
            self.seq_rm(seq, 64, -1)

        costs = time_batches(run, plausible=lambda found: not DraftLength(BatchCost(found)).hopeless)
        self.seq_rm(seq, 0, -1)
        return costs, all(np.array_equal(first_rows[0], row) for row in first_rows[1:])

    def decode(self, rows: Sequence[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        return self._compute.call(self._decode, rows)

    def _decode(self, rows: Sequence[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        if len(rows) > self.n_batch:
            raise EngineError(f"a batch of {len(rows)} rows exceeds n_batch={self.n_batch}")
        b = self._batch
        b.n_tokens = len(rows)
        # With a KV stream per sequence, llama.cpp runs one forward pass per run of consecutive
        # sequence ids in the batch (seqs 3,1,2 take three passes; 1,2,3 take one), so rows go in
        # by sequence. The logits come back in the caller's row order.
        order = sorted(range(len(rows)), key=lambda k: rows[k][2])
        wanted = []
        for i, k in enumerate(order):
            token, pos, seq, wants = rows[k]
            b.token[i] = token
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if wants else 0
            if wants:
                wanted.append((k, i))
        wanted.sort()
        if self._governor is not None:
            self.use_threads(self._governor.threads())
        rc = self._ll.llama_decode(self._ctx, b)
        if rc == 1:
            raise KVCacheFull("no room in the KV cache for this batch")
        if rc != 0:
            raise EngineError(f"llama_decode failed with code {rc}")
        # Views, not copies (a row is 600 KB): they stay valid until the next decode, and the
        # scheduler samples from them before it decodes again.
        return [
            np.ctypeslib.as_array(self._ll.llama_get_logits_ith(self._ctx, i), shape=(self.n_vocab,))
            for _, i in wanted
        ]

    def use_threads(self, n: int) -> None:
        """Decode on `n` threads from now on (until the governor, if any, decides otherwise)."""
        if n != self.threads_now:
            self._ll.llama_set_n_threads(self._ctx, n, n)
            self.threads_now = n

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        if not self._ll.llama_memory_seq_rm(self._mem, seq, p0, p1):
            # Partial removal can fail on some cache types; removing the whole sequence can't.
            self._ll.llama_memory_seq_rm(self._mem, seq, -1, -1)
            raise EngineError(f"could not trim sequence {seq} to {p0} tokens")

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        # Sequences live in separate streams, and llama.cpp copies across streams only whole:
        # copy all of src, then cut dst back to the range asked for.
        self._ll.llama_memory_seq_cp(self._mem, src, dst, -1, -1)
        if p0 > 0:
            self._ll.llama_memory_seq_rm(self._mem, dst, 0, p0)
        if p1 >= 0:
            self._ll.llama_memory_seq_rm(self._mem, dst, p1, -1)

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        # llama.cpp rotates the moved keys to their new positions at the next decode.
        self._ll.llama_memory_seq_add(self._mem, seq, p0, p1, delta)

    def seq_state_get(self, seq: int) -> bytearray:
        """One sequence's KV cells as llama.cpp serializes them (for the prefix cache on disk)."""
        size = self._ll.llama_state_seq_get_size(self._ctx, seq)
        data = bytearray(size)
        if size:
            # Into a bytearray directly: a 6k-token prefix is ~70 MB, one copy is enough.
            buf = (ctypes.c_uint8 * size).from_buffer(data)
            written = self._ll.llama_state_seq_get_data(self._ctx, buf, size, seq)
            if written != size:
                raise EngineError(f"llama.cpp saved {written} of {size} bytes of sequence {seq}")
        return data

    def seq_state_set(self, seq: int, data: bytearray) -> None:
        """Replace a sequence's cells with ones `seq_state_get` saved (in this or another process)."""
        self._ll.llama_memory_seq_rm(self._mem, seq, -1, -1)
        buf = (ctypes.c_uint8 * len(data)).from_buffer(data)
        if self._ll.llama_state_seq_set_data(self._ctx, buf, len(data), seq) != len(data):
            # llama.cpp empties the sequence when a restore fails half-way; make sure of it.
            self._ll.llama_memory_seq_rm(self._mem, seq, -1, -1)
            raise EngineError(f"llama.cpp could not restore sequence {seq} from {len(data)} bytes")

    def grammar(self, gbnf: str, root: str) -> LlamaGrammarMatcher:
        return LlamaGrammarMatcher(self._ll, self._vocab, gbnf, root)

    def meta(self, key: str) -> str | None:
        """A GGUF metadata value, such as `tokenizer.chat_template`."""
        buf = ctypes.create_string_buffer(1 << 16)
        n = self._ll.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        return buf.value.decode(errors="replace") if n >= 0 else None

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            self._ll.llama_batch_free(self._batch)
            self._ll.llama_free(self._ctx)
            self._ll.llama_model_free(self._model)
            self._ctx = None
