"""Print the CMAKE_ARGS for building llama-cpp-python on this machine's CPU.

A `-march=native` build picks up AMX where the CPU advertises it, and ggml's AMX matmul crashes
on the first decode on such machines; a fixed AVX-512 build dies with "Illegal instruction" on
CPUs without it (seen on AVX2-only AMD EPYC machines). So: no native build, AMX always off, and
each x86 extension on exactly when /proc/cpuinfo lists it. The wheel cache is keyed by these args.

llamafile's sgemm stays on (batches run about twice as fast with it), patched
(scripts/llama_patch.py) so that it sums a row the same way whether the row is alone or in a batch,
and with whiz's batch kernels for AVX2 and AVX-512 (scripts/llama_kernels/), which keep that property.
With that, and at run time only the repacked weights it sums exactly and no tiled matmul (see
whiz.engine.llamacpp),
every row's logits are bit-identical whatever the batch, which is what makes speculative decoding
output exactly what plain decoding writes.

WHIZ_CPU_FLAGS_DROP (space-separated cpuinfo flags, shell patterns allowed) builds as if the CPU
lacked them, to build and test another CPU's code paths here: `WHIZ_CPU_FLAGS_DROP='avx512*
avx_vnni'` gives an AVX2-only build on an AVX-512 machine (use it with its own WHIZ_WHEEL_CACHE and
venv). The flags change the args and so the wheel's cache key; tests that ask which kernels the
build has read the same flags (`cpu_flags`).
"""

import os
from fnmatch import fnmatchcase
from pathlib import Path

FEATURES = {  # cpuinfo flag -> ggml option
    "avx": "GGML_AVX",
    "avx2": "GGML_AVX2",
    "fma": "GGML_FMA",
    "f16c": "GGML_F16C",
    "bmi2": "GGML_BMI2",
    "avx512f": "GGML_AVX512",
    "avx512vbmi": "GGML_AVX512_VBMI",
    "avx512_vnni": "GGML_AVX512_VNNI",
    "avx512_bf16": "GGML_AVX512_BF16",
    "avx_vnni": "GGML_AVX_VNNI",
}


def cpu_flags() -> set[str]:
    """The CPU's flags as /proc/cpuinfo lists them, less those WHIZ_CPU_FLAGS_DROP names."""
    drop = os.environ.get("WHIZ_CPU_FLAGS_DROP", "").split()
    return {flag for flag in _cpuinfo_flags() if not any(fnmatchcase(flag, pattern) for pattern in drop)}


def _cpuinfo_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cmake_args() -> str:
    flags = cpu_flags()
    args = ["-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=OFF", "-DGGML_LLAMAFILE=ON"]
    args += ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]
    args += [f"-D{opt}={'ON' if flag in flags else 'OFF'}" for flag, opt in FEATURES.items()]
    return " ".join(args)


if __name__ == "__main__":
    print(cmake_args())
