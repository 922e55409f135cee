"""Model files: the registry of known models, where to fetch them, and the store that holds them.

`ModelStore(default_home()).resolve("qwen2.5-coder-0.5b")` gives a verified local GGUF path,
pulling it first if needed.
"""

from whiz.models.errors import (
    ModelDownloadError,
    ModelError,
    ModelNotInstalledError,
    ModelVerifyError,
    UnknownModelError,
)
from whiz.models.progress import ProgressFn, rich_progress
from whiz.models.registry import ModelSpec, Registry, default_registry
from whiz.models.store import ModelStatus, ModelStore, default_home

__all__ = [
    "ModelDownloadError",
    "ModelError",
    "ModelNotInstalledError",
    "ModelSpec",
    "ModelStatus",
    "ModelStore",
    "ModelVerifyError",
    "ProgressFn",
    "Registry",
    "UnknownModelError",
    "default_home",
    "default_registry",
    "rich_progress",
]
