"""Checking model files: a streaming sha256, and a sidecar marker so a verified file is not rehashed.

The marker `<file>.sha256` records the size, mtime and hash seen when the file was last hashed. If
the file still has that size and mtime, the recorded hash is trusted; hashing 0.5-1 GB on every
startup would cost seconds for nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

CHUNK_BYTES = 1 << 20


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def marker_path(path: Path) -> Path:
    """Where the verification marker of `path` lives."""
    return path.with_name(path.name + ".sha256")


def write_marker(path: Path, sha256: str) -> None:
    """Record that `path`, as it is now, hashes to `sha256`."""
    stat = path.stat()
    record = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    marker_path(path).write_text(json.dumps(record) + "\n")


def read_marker(path: Path) -> str | None:
    """The recorded hash of `path`, or None if there is no marker or the file changed since."""
    try:
        record = json.loads(marker_path(path).read_text())
        stat = path.stat()
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    if record.get("size") != stat.st_size or record.get("mtime_ns") != stat.st_mtime_ns:
        return None
    sha = record.get("sha256")
    return sha if isinstance(sha, str) else None


def is_verified(path: Path, *, size: int | None, sha256: str | None) -> bool:
    """True if `path` exists with the expected size and hash.

    A valid marker answers at once. Without one, a file with a known expected hash is hashed
    once and marked; a file with no expected hash (an `hf:` download) counts only if marked,
    since the marker is written only after a complete download.
    """
    try:
        actual_size = path.stat().st_size
    except OSError:
        return False
    if size is not None and actual_size != size:
        return False
    recorded = read_marker(path)
    if recorded is not None:
        return sha256 is None or recorded == sha256
    if sha256 is None:
        return False
    if sha256_file(path) != sha256:
        return False
    write_marker(path, sha256)
    return True
