"""Patch an unpacked llama-cpp-python source tree before it is built (see ensure_llama.sh).

Three changes, all in llamafile's sgemm inside ggml's CPU backend, all about batches:

1. Sums that do not depend on the batch. sgemm declines single-row products ("only enable sgemm
   for prompt processing"), so an attention product (f16 KV cache times one query) is summed by
   ggml's vec_dot in one order when a token is decoded alone and by sgemm in another when it is
   verified in a batch of drafts. Those sums differ in the last bits, enough to flip near-ties,
   and then speculative output is not what plain decoding writes. With the patch, float products
   go through sgemm whatever the batch. Quantized weights keep ggml's vec_dot for one row: for
   the types sgemm handles on x86 (q8_0, q5_0, q4_0, iq4_nl) it does the same operations per
   element, in the same order, as sgemm's tiles (a test checks the result).

2. Cheaper small batches on AVX2. With 16 vector registers sgemm's quantized tiles are 4 weight
   rows by 2 columns, so each weight block is unpacked (q5_0: nibbles plus a fifth bit, about as
   dear as the dot product itself) once per two columns. Decode batches (a few sequences, or a
   draft being verified) have 2-16 columns, so the patch adds a tile of one weight row by up to 8
   columns, used whenever there are 2 or more.

3. k-quant weights in batches. sgemm does not take q4_K or q6_K (the 0.5B's ffn_down, most of
   the 1.5B), so ggml summed each column with its own vec_dot and unpacked the weights again for
   every column. The patch adds a kernel that unpacks a weight row once per 4 columns. It runs on
   AVX-512 too: ggml's vec_dot for q4_K and q6_K has no AVX-512 branch (an AVX-512 build takes the
   AVX2 one), so the kernel's AVX2 operations are still vec_dot's own there.

In 2 and 3, each element is still summed with vec_dot's own float operations in vec_dot's order
(the integer parts are exact), so results are bit-identical to a row decoded alone; the
integration test test_batch_invariance checks it, for both models. Measured (2 cores, AVX2, 2026-11-22):
0.5B 5 rows 92 -> 55 ms, 16 rows 179 -> 142 ms, prefill about 12% faster; 1.5B 4 rows 164 ->
104 ms, 16 rows 545 -> 377 ms. One row is unchanged (vec_dot).

The C++ lives in scripts/llama_kernels/; ensure_llama.sh keys the wheel cache on it too.

5. Repacked q4_K weights, exact. llama.cpp repacks q4_K weights 8 rows at a time ("CPU_REPACK");
   its one-column kernel (gemv) is about a quarter cheaper per decoded token than vec_dot on the
   plain layout, but its kernel for 4+ columns (gemm) adds the float products once per 64 weights
   where gemv adds them once per 256, so a row's logits differed alone and in a batch. In a
   process with GGML_WHIZ_EXACT=1 (whiz's runtime sets it; llama.cpp's own defaults stay as they
   are elsewhere) only q4_K is repacked, one column takes llama.cpp's gemv and 2+ columns whiz's
   kernel (llama_kernels/q4_K_x8_columns.inc), which sums each column with gemv's float
   operations in gemv's order and reuses each unpacked weight vector for 4 columns. It has an
   AVX-512 VNNI branch and an AVX2 (with FMA and F16C) one, each bit-identical to gemv in its
   build; on CPUs without AVX2 nothing is repacked in that process (as before).

4. Only what the bindings load. llama-cpp-python forces llama.cpp's `common` library on (with
   cpp-httplib under it), which only llama.cpp's own tools and the multimodal library link: the
   Python package loads libllama and ggml alone. It is about a third of the C++ a build compiles
   (chat templates over nlohmann's JSON, an HTTP client and server), minutes of a 2-core `make`.

Usage: python3 scripts/llama_patch.py SOURCE_DIR   (idempotent; fails if the code has moved)
"""

import sys
from pathlib import Path

SGEMM = "vendor/llama.cpp/ggml/src/ggml-cpu/llamafile/sgemm.cpp"
REPACK = "vendor/llama.cpp/ggml/src/ggml-cpu/repack.cpp"
BEFORE = """#if !defined(__MMA__)
    if (n < 2)
        return false;
#endif
"""
AFTER = """#if !defined(__MMA__)
    if (n < 2 && Atype != GGML_TYPE_F16 && Atype != GGML_TYPE_F32 && Atype != GGML_TYPE_BF16)
        return false;
#endif
"""

# 2. The one-row tile (llama_kernels/q0_one_row_tile.inc), tried first in
#    tinyBLAS_Q0_AVX::mnpack when there are 2+ columns.
DISPATCH_BEFORE = """    void mnpack(int64_t m0, int64_t m, int64_t n0, int64_t n) {
        int64_t mc, nc, mp, np;
        switch ((MIN(m - m0, 4) << 4) | MIN(n - n0, 4)) {
#if VECTOR_REGISTERS == 32
        case 0x44:
            mc = 4;
            nc = 4;
#if defined(__AVX2__) && defined(__F16C__)
            gemm4xN<4>(m0, m, n0, n);"""
DISPATCH_AFTER = """    void mnpack(int64_t m0, int64_t m, int64_t n0, int64_t n) {
        int64_t mc, nc, mp, np;
#if VECTOR_REGISTERS == 16 && defined(__AVX2__)
        if (n - n0 >= 2) {
            gemm1xNpack(m0, m, n0, n);
            return;
        }
#endif
        switch ((MIN(m - m0, 4) << 4) | MIN(n - n0, 4)) {
#if VECTOR_REGISTERS == 32
        case 0x44:
            mc = 4;
            nc = 4;
#if defined(__AVX2__) && defined(__F16C__)
            gemm4xN<4>(m0, m, n0, n);"""
KERNEL_ANCHOR = """    template <int RM, int RN>
    NOINLINE void gemm(int64_t m0, int64_t m, int64_t n0, int64_t n) {
        int64_t ytiles = (m - m0) / RM;
        int64_t xtiles = (n - n0) / RN;
        int64_t tiles = xtiles * ytiles;
        int64_t duty = (tiles + nth - 1) / nth;
        int64_t start = duty * ith;
        int64_t end = start + duty;
        if (end > tiles)
            end = tiles;
        for (int64_t job = start; job < end; ++job) {
            int64_t ii = m0 + job / xtiles * RM;
            int64_t jj = n0 + job % xtiles * RN;
            __m256 Cv[RN][RM] = {};
            for (int64_t l = 0; l < k; ++l)
                for (int64_t j = 0; j < RN; ++j)
                    for (int64_t i = 0; i < RM; ++i) {
#if defined(__AVX2__)
                        __m256 udTmp = updot("""
KERNELS = Path(__file__).parent / "llama_kernels"  # C++ inserted whole; part of the cache key

# 3. k-quant weights (q4_K, q6_K) times a few q8_K columns: sgemm declined these, so ggml summed
#    each column with its own vec_dot, unpacking the weights again for every column.
SGEMM_FN = """bool llamafile_sgemm(const struct ggml_compute_params * params, int64_t m, int64_t n, int64_t k,
"""
CASE_ANCHOR = """    case GGML_TYPE_IQ4_NL: {
        if (Btype != GGML_TYPE_Q8_0)
"""
KQ_CASE = """    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q6_K: {
#if defined(__AVX2__) && defined(__F16C__)
        if (Btype != GGML_TYPE_Q8_K)
            return false;
        whizKQ tb{k, A, lda, (const block_q8_K *)B, ldb, (float *)C, ldc, params->ith, params->nth};
        if (Atype == GGML_TYPE_Q4_K)
            tb.matmul<block_q4_K>(m, n);
        else
            tb.matmul<block_q6_K>(m, n);
        return true;
#else
        return false;
#endif
    }

"""


def patches() -> list[tuple[str, str]]:
    """(before, after) pairs: each `before` occurs exactly once in the stock source."""
    one_row_tile = (KERNELS / "q0_one_row_tile.inc").read_text() + "\n"
    kquant_columns = (KERNELS / "kquant_columns.inc").read_text() + "\n"
    return [
        (BEFORE, AFTER),
        (DISPATCH_BEFORE, DISPATCH_AFTER),
        (KERNEL_ANCHOR, one_row_tile + KERNEL_ANCHOR),
        (SGEMM_FN, kquant_columns + SGEMM_FN),
        (CASE_ANCHOR, KQ_CASE + CASE_ANCHOR),
    ]


# 5. Repacked q4_K weights, exact (llama_kernels/q4_K_x8_columns.inc), in processes that set
#    GGML_WHIZ_EXACT=1 (whiz's runtime does; llama.cpp's own defaults stay as they are elsewhere).
#    There, only q4_K is repacked (the one type with an exact batch kernel), a lone column takes
#    llama.cpp's gemv and 2+ columns whiz's kernel, which sums each column as gemv does.
KERNEL_AT = """static block_q4_Kx8 make_block_q4_Kx8(block_q4_K * in, unsigned int blck_size_interleave) {
"""
"""At global scope, before the repack code, so the chooser below (outside any namespace) sees it."""
TRAITS_CLASS = (
    "template <typename BLOC_TYPE, int64_t INTER_SIZE, int64_t NB_COLS, ggml_type PARAM_TYPE> "
    "class tensor_traits : public tensor_traits_base {\n"
)
TRAITS_WHIZ = """
    // whiz: true where this matmul runs whiz's exact kernel (q4_K repacked by 8, GGML_WHIZ_EXACT=1)
    static bool whiz_rows() {
#ifdef WHIZ_Q4_K_X8_COLUMNS
        return std::is_same<BLOC_TYPE, block_q4_K>::value && INTER_SIZE == 8 && NB_COLS == 8 && whiz_exact();
#else
        return false;
#endif
    }
"""
QUANT_LOOP = """            for (int64_t i11 = ith * 4; i11 < ne11 - ne11 % 4; i11 += nth * 4) {
"""
QUANT_LOOP_WHIZ = """            // whiz: its kernel reads plain q8_K rows, quantized as for one column (gemv)
            for (int64_t i11 = ith * 4; !whiz_rows() && i11 < ne11 - ne11 % 4; i11 += nth * 4) {
"""
QUANT_REST = """            const int64_t i11_processed = ne11 - ne11 % 4;
"""
QUANT_REST_WHIZ = """            const int64_t i11_processed = whiz_rows() ? 0 : ne11 - ne11 % 4;
"""
CHUNK = """        // If there are more than three rows in src1, use gemm; otherwise, use gemv.
"""
CHUNK_WHIZ = """#ifdef WHIZ_Q4_K_X8_COLUMNS
        if (whiz_rows() && nrows > 1) {
            whiz_q4_Kx8_matmul(ne00 / QK_K, src0_ptr, src0_start, src0_end, src1_ptr, src1_col_stride, nrows,
                               (float *) dst_ptr, nb1 / nb0);
            return;
        }
#endif
"""
CHOOSE = """    if (cur->type == GGML_TYPE_Q4_0) {
"""
CHOOSE_WHIZ = """    if (whiz_exact()) {  // whiz: only types with an exact batch kernel, 2-D
#ifdef WHIZ_Q4_K_X8_COLUMNS
        if (cur->type == GGML_TYPE_Q4_K && cur->ne[1] % 8 == 0 && cur->ne[2] == 1) {
            return &q4_K_8x8_q8_K;
        }
#endif
        return nullptr;
    }
"""


def repack_patches() -> list[tuple[str, str]]:
    kernel = (KERNELS / "q4_K_x8_columns.inc").read_text() + "\n"
    return [
        (KERNEL_AT, kernel + KERNEL_AT),
        (TRAITS_CLASS, TRAITS_CLASS + TRAITS_WHIZ),
        (QUANT_LOOP, QUANT_LOOP_WHIZ),
        (QUANT_REST, QUANT_REST_WHIZ),
        (CHUNK, CHUNK_WHIZ + CHUNK),
        (CHOOSE, CHOOSE_WHIZ + CHOOSE),
    ]


CMAKE = "CMakeLists.txt"
COMMON_ON = '\n    set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)'
COMMON_OFF = '\n    set(LLAMA_BUILD_COMMON OFF CACHE BOOL "Build llama.cpp common library" FORCE)'
"""At the top level of `if (LLAMA_BUILD)`, indented so (the WebAssembly branch sets it off too)."""


def patch(source: Path) -> str:
    return ", ".join(
        [
            patch_file(source / SGEMM, patches()),
            patch_file(source / REPACK, repack_patches()),
            patch_file(source / CMAKE, [(COMMON_ON, COMMON_OFF)]),
        ]
    )


def patch_file(path: Path, todo: list[tuple[str, str]]) -> str:
    text = path.read_text()
    if all(after in text for _, after in todo):
        return "already patched"
    for before, after in todo:
        if text.count(before) != 1:
            raise SystemExit(
                f"llama_patch: the code to patch was not found in {path}; update scripts/llama_patch.py"
            )
        text = text.replace(before, after)
    path.write_text(text)
    return "patched"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(f"llama_patch: {patch(Path(sys.argv[1]))} ({SGEMM}, {REPACK}, {CMAKE})")
