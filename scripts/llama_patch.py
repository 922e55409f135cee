"""Patch an unpacked llama-cpp-python source tree before it is built (see ensure_llama.sh).

One change, in ggml's CPU backend: llamafile's sgemm declines single-row products ("only enable
sgemm for prompt processing"), so an attention product (f16 KV cache times one query) is summed
by ggml's vec_dot in one order when a token is decoded alone and by sgemm in another when it is
verified in a batch of drafts. Those sums differ in the last bits, enough to flip near-ties, and
then speculative output is not what plain decoding writes. With the patch, float products go
through sgemm whatever the batch, so every row is summed the same way. Quantized weights keep
ggml's vec_dot for one row: for the types sgemm handles on x86 (q8_0, q5_0, q4_0, iq4_nl) it does
the same operations per element, in the same order, as sgemm's tiles (a test checks the result).

Usage: python3 scripts/llama_patch.py SOURCE_DIR   (idempotent; fails if the code has moved)
"""

import sys
from pathlib import Path

SGEMM = "vendor/llama.cpp/ggml/src/ggml-cpu/llamafile/sgemm.cpp"
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


def patch(source: Path) -> str:
    path = source / SGEMM
    text = path.read_text()
    if AFTER in text:
        return "already patched"
    if text.count(BEFORE) != 1:
        raise SystemExit(
            f"llama_patch: the code to patch was not found in {path}; update scripts/llama_patch.py"
        )
    path.write_text(text.replace(BEFORE, AFTER))
    return "patched"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(f"llama_patch: {patch(Path(sys.argv[1]))} {SGEMM}")
