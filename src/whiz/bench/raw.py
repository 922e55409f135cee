"""The decode speed of plain llama-cpp-python on the same GGUF: the baseline whiz must keep up with.

whiz's target is decode at no less than 95% of this number, measured on the same machine.
"""

from __future__ import annotations

import time

_PROMPT = "# A small, well-tested Python module for parsing INI-style configuration files.\nimport "


def raw_llama_decode_tokens_per_s(
    model_path: str, n_threads: int, n_tokens: int = 128, *, n_gpu_layers: int = -1
) -> float:
    """Greedy-decode `n_tokens` with llama_cpp's high-level `Llama`; time only the decode phase.

    The clock starts at the first generated token, so prompt prefill is excluded, and end-of-text
    does not stop it: `Llama.generate` yields tokens until told to stop. `n_gpu_layers` matches
    whiz's default (offload everything); a CPU-only build ignores it.
    """
    from llama_cpp import Llama  # lazy: heavy, and absent while llama-cpp-python is being built

    llm = Llama(model_path, n_ctx=2048, n_threads=n_threads, n_gpu_layers=n_gpu_layers, verbose=False)
    try:
        tokens = llm.tokenize(_PROMPT.encode())
        first_at = None
        produced = 0
        for _ in llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
            if first_at is None:
                first_at = time.perf_counter()
            else:
                produced += 1
            if produced >= n_tokens:
                break
        assert first_at is not None
        return produced / (time.perf_counter() - first_at)
    finally:
        llm.close()
