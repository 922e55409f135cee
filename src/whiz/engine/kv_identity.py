"""What a saved KV state belongs to: the model file, the llama.cpp build, the settings of the cache.

A state is only valid in an engine that would have computed the same cells: the same weights
(the file's SHA-256, not its name), the same build (kernels sum in different orders; whiz's patch
changes them), the same cache type and layout. Anything that differs gives another fingerprint,
and entries with another fingerprint are never restored.
"""

from __future__ import annotations

import hashlib
import json
import sys
from importlib import metadata
from pathlib import Path

from whiz.models.verify import read_marker, sha256_file


def fingerprint(identity: dict) -> str:
    """A short stable hash of an identity, used in file names and checked in headers."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def model_sha256(path: Path, cache_file: Path) -> str:
    """The model file's SHA-256: from the store's marker, or hashed once and remembered by size+mtime.

    Hashing a 1 GB model costs seconds, so the answer is kept in `cache_file` (a JSON map).
    """
    path = path.resolve()
    if (known := read_marker(path)) is not None:
        return known
    stat = path.stat()
    key = f"{path}:{stat.st_size}:{stat.st_mtime_ns}"
    try:
        seen = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        seen = {}
    if not isinstance(seen, dict):
        seen = {}
    if isinstance(found := seen.get(key), str):
        return found
    digest = sha256_file(path)
    seen[key] = digest
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_name(cache_file.name + ".tmp")
        tmp.write_text(json.dumps(seen, indent=1) + "\n")
        tmp.replace(cache_file)
    except OSError:
        pass  # only a lost shortcut: the file is hashed again next start
    return digest


def llama_build() -> str:
    """llama-cpp-python's version and the build key scripts/ensure_llama.sh recorded in the venv.

    A stock wheel has no key; its version alone then names it, and a library of another size
    (rebuilt by hand with other flags) still gets another identity.
    """
    try:
        version = metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        version = "unknown"
    keys = sorted(p.name.removeprefix(".whiz-llama-") for p in Path(sys.prefix).glob(".whiz-llama-*"))
    build = keys[0] if keys else "stock"
    try:
        import llama_cpp

        libs = (Path(llama_cpp.__file__).parent / "lib").glob("*.so*")
        size = sum(p.stat().st_size for p in libs if p.is_file() and not p.is_symlink())
    except ImportError:
        size = 0
    return f"{version}+{build}+{size}"
