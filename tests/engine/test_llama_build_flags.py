"""The llama.cpp build's CPU extensions: each on where the CPU lists it, and WHIZ_CPU_FLAGS_DROP
builds as if some were missing (an AVX2-only build on an AVX-512 machine, to test that code
path). The args are the wheel cache's key, so a dropped flag is another wheel."""

from __future__ import annotations

import pytest
from scripts import llama_cmake_args

AVX512_CPU = {"avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"}


@pytest.fixture
def avx512_cpu(monkeypatch):
    monkeypatch.setattr(llama_cmake_args, "_cpuinfo_flags", lambda: set(AVX512_CPU))
    monkeypatch.delenv("WHIZ_CPU_FLAGS_DROP", raising=False)


def options(args: str) -> dict[str, str]:
    return dict(a.removeprefix("-D").split("=", 1) for a in args.split())


def test_each_extension_is_on_where_the_cpu_lists_it(avx512_cpu):
    on = options(llama_cmake_args.cmake_args())
    assert on["GGML_AVX2"] == on["GGML_AVX512"] == on["GGML_AVX512_VNNI"] == "ON"
    assert on["GGML_AVX512_BF16"] == on["GGML_AVX_VNNI"] == "OFF"  # not listed
    assert on["GGML_NATIVE"] == on["GGML_AMX_TILE"] == "OFF"


def test_dropped_flags_build_as_if_the_cpu_lacked_them(avx512_cpu, monkeypatch):
    plain = llama_cmake_args.cmake_args()
    monkeypatch.setenv("WHIZ_CPU_FLAGS_DROP", "avx512* avx_vnni")
    on = options(llama_cmake_args.cmake_args())
    avx512 = ("GGML_AVX512", "GGML_AVX512_VBMI", "GGML_AVX512_VNNI", "GGML_AVX512_BF16")
    assert all(on[o] == "OFF" for o in avx512)
    assert on["GGML_AVX2"] == on["GGML_FMA"] == on["GGML_F16C"] == on["GGML_BMI2"] == "ON"
    assert llama_cmake_args.cmake_args() != plain  # another wheel
    # what the tests read to know which kernels the build has
    assert llama_cmake_args.cpu_flags() == AVX512_CPU - {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"}
