"""llama.cpp's own speed, in a process of its own: the baseline of `whiz bench engine`.

A child process, so that nothing whiz sets for exactness (no tiled matmul, no repacked weights)
reaches llama.cpp's defaults, and so that its OpenMP team is not a second one in whiz's process
(see whiz.engine.compute_thread). It loads `Llama` once, then answers one JSON line per request on
stdin: {"prompt": [ids], "n": tokens} -> {"prefill_tok_s", "decode_tok_s", "tokens"}.

Usage: python -m whiz.bench.llama_baseline MODEL_PATH THREADS N_CTX
"""

from __future__ import annotations

import json
import os
import sys
import time


def stock_env() -> dict[str, str]:
    """This process's environment less whiz's GGML_* settings (exact kernels, no tiled matmul),
    for a llama.cpp program that should run with its own defaults."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GGML_")}


def run(llm, prompt: list[int], n: int) -> dict:
    """Greedy: prefill `prompt`, then `n` tokens after the first, timed as whiz's engine times them."""
    llm.reset()
    tokens: list[int] = []
    start = time.perf_counter()
    first = 0.0
    for token in llm.generate(prompt, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
        if not tokens:
            first = time.perf_counter()
        tokens.append(token)
        if len(tokens) > n:
            break
    end = time.perf_counter()
    return {
        "prefill_tok_s": len(prompt) / (first - start),
        "decode_tok_s": n / (end - first),
        "tokens": tokens,
    }


def main(argv: list[str]) -> int:
    from llama_cpp import Llama

    path, threads, n_ctx = argv[0], int(argv[1]), int(argv[2])
    llm = Llama(path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(run(llm, request["prompt"], request["n"])), flush=True)
    llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
