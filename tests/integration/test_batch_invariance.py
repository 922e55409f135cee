"""A row's logits must not depend on the batch it is decoded in.

Speculative decoding verifies drafts in batches; plain decoding goes one token at a time. Output
can only be identical if both compute every row bit for bit the same, which holds only with the
kernels `make` builds (llamafile's sgemm and llama.cpp's repacked q4_K weights, with
scripts/llama_patch.py) and the runtime settings whiz applies (GGML_WHIZ_EXACT, no tiled
matmul). This guards against a build, an upgrade or a setting that breaks it.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from scripts.llama_cmake_args import cpu_flags

from tests.conftest import model_threads
from whiz.engine.llamacpp import LlamaRuntime
from whiz.models import ModelNotInstalledError, ModelStore, default_home

pytestmark = pytest.mark.model


@pytest.fixture(scope="module", params=["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
def runtime(request):
    """Both models: the 0.5B's weights are mostly q5_0 (sgemm's tiles), the 1.5B's q4_K (repacked,
    where the build has whiz's kernel for it) and q6_K (whiz's k-quant kernel), so each checks
    different batch kernels against the one-row ones."""
    try:  # the 0.5B is pulled if missing, as for every real-model test; the 1.5B only if pulled
        path = ModelStore(default_home()).resolve(request.param, pull=request.param == "qwen2.5-coder-0.5b")
    except ModelNotInstalledError:
        pytest.skip(f"{request.param} is not installed (`whiz models pull {request.param}`)")
    rt = LlamaRuntime(
        path, kv_budget_mb=None, ctx=512, n_seq_max=5, n_threads=model_threads(), threads_follow_load=False
    )
    yield rt
    rt.close()


def test_logits_are_bit_identical_alone_and_in_batches(runtime):
    rng = random.Random(0)
    # 16 rows after a prompt of 20: enough for every batch shape below to leave a remainder or
    # fill whole tiles, and each lone row is a whole decode step of the model on one core.
    tokens = [rng.randrange(1000, 20000) for _ in range(36)]
    prompt, rows = tokens[:20], tokens[20:]
    for seq in range(5):
        runtime.decode([(t, i, seq, False) for i, t in enumerate(prompt)])

    def logits(seq: int, batch: int, count: int = len(rows)) -> list[np.ndarray]:
        """The first `count` rows' logits, decoded in batches of `batch` in sequence `seq`."""
        out = []
        for start in range(0, count, batch):
            chunk = range(start, min(start + batch, count))
            out += [np.array(x) for x in runtime.decode([(rows[k], 20 + k, seq, True) for k in chunk])]
        return out

    # Batches of 5 and 13 leave remainders, which other tiles sum (see scripts/llama_patch.py).
    alone, by_eight, all_at_once = logits(0, 1), logits(1, 8), logits(2, len(rows))
    by_five = logits(3, 5)
    runtime.seq_rm(3, 20, -1)
    by_thirteen = logits(3, 13)
    runtime.seq_rm(3, 20, -1)
    for a, *batched in zip(alone, by_eight, all_at_once, by_five, by_thirteen, strict=True):
        assert all(np.array_equal(a, b) for b in batched)

    # Nor on the thread count, which follows the machine's load (whiz.engine.threads): the first
    # eight rows one at a time, then all sixteen in batches of eight.
    threads = runtime.threads_now
    runtime.use_threads(1 if threads > 1 else 2)
    runtime.seq_rm(3, 20, -1)
    try:
        assert all(np.array_equal(a, b) for a, b in zip(alone[:8], logits(3, 1, 8), strict=True))
        runtime.seq_rm(3, 20, -1)
        assert all(np.array_equal(a, b) for a, b in zip(by_eight, logits(3, 8), strict=True))
    finally:
        runtime.use_threads(threads)
    runtime.seq_rm(3, 20, -1)

    # Parallel candidates and interleaved sessions share batches: two sequences decoded side by
    # side, one token each per step, must match the lone sequence too (eight such steps: each is
    # the same two-row batch shape).
    side = 8
    for k, expected in enumerate(alone[:side]):
        side_by_side = runtime.decode([(rows[k], 20 + k, 3, True), (rows[k], 20 + k, 4, True)])
        assert all(np.array_equal(expected, np.array(x)) for x in side_by_side)

    # Rows may come in any sequence order; each row's logits come back in the caller's order.
    pos = 20 + side  # the next position of sequences 3 and 4
    one, other = tokens[0], tokens[1]
    alone_4 = np.array(runtime.decode([(one, pos, 4, True)])[0])
    runtime.seq_rm(4, pos, -1)
    alone_3 = np.array(runtime.decode([(other, pos, 3, True)])[0])
    runtime.seq_rm(3, pos, -1)
    got_4, got_3 = (np.array(x) for x in runtime.decode([(one, pos, 4, True), (other, pos, 3, True)]))
    assert np.array_equal(got_4, alone_4) and np.array_equal(got_3, alone_3)
    assert not np.array_equal(alone_4, alone_3)


def _exact_repack_kernel_here() -> bool:
    """Whether whiz's build has its kernel for repacked q4_K weights: it has an AVX-512 VNNI and an
    AVX2 branch, and the AVX2 one needs FMA and F16C as llama.cpp's gemv does (the build turns
    each extension on as `cpu_flags` lists it, `scripts/llama_cmake_args.py`)."""
    return {"avx2", "fma", "f16c"} <= cpu_flags()


def test_q4_K_weights_are_repacked_where_they_sum_exactly(runtime):
    """A decoded token costs about a quarter less with q4_K weights repacked (llama.cpp's own
    layout and one-row kernel), so they must be, wherever the batch kernel keeps rows exact; and
    nowhere else, or the test above fails."""
    from whiz.engine.llamacpp import REPACK

    if not REPACK:
        pytest.skip("repacked weights are off (GGML_WHIZ_EXACT=1 turns them on)")
    if _exact_repack_kernel_here():
        assert runtime.repacked_mib > 0
    else:
        assert runtime.repacked_mib == 0
