"""A download in progress: bytes go to `<final>.part`, hashed as they arrive, and reach the final
name only once size and sha256 check out. So a failed pull never leaves a file that looks installed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self

from whiz.models.errors import ModelVerifyError
from whiz.models.verify import CHUNK_BYTES, marker_path, write_marker


class PartFile:
    """Write, verify, then atomically rename. Use as a context manager.

    With `resume=True` an existing `.part` is kept and hashed, and writes append to it; the caller
    asks the source for the bytes from `size` on. With `keep_on_error=True` an exception leaves the
    `.part` in place for a later resume; otherwise it is deleted.
    """

    def __init__(self, final: Path, *, resume: bool = False, keep_on_error: bool = False):
        self.final = final
        self.path = final.with_name(final.name + ".part")
        self.keep_on_error = keep_on_error
        self.size = 0
        self._hash = hashlib.sha256()
        final.parent.mkdir(parents=True, exist_ok=True)
        if resume and self.path.exists():
            with self.path.open("rb") as f:
                while block := f.read(CHUNK_BYTES):
                    self._hash.update(block)
                    self.size += len(block)
            self._file: BinaryIO = self.path.open("ab")
        else:
            self._file = self.path.open("wb")

    def write(self, data: bytes) -> None:
        """Append bytes and feed them to the hash."""
        self._file.write(data)
        self._hash.update(data)
        self.size += len(data)

    def restart(self) -> None:
        """Drop what was written so far (the source ignored a resume request)."""
        self._file.seek(0)
        self._file.truncate()
        self._hash = hashlib.sha256()
        self.size = 0

    def commit(self, *, size: int | None, sha256: str | None) -> Path:
        """Check size and hash, then move into place and mark verified; on mismatch delete and raise."""
        self._file.close()
        actual_sha = self._hash.hexdigest()
        if (size is not None and self.size != size) or (sha256 is not None and actual_sha != sha256):
            self.path.unlink(missing_ok=True)
            raise ModelVerifyError(
                self.final,
                expected_size=size,
                actual_size=self.size,
                expected_sha256=sha256,
                actual_sha256=actual_sha,
            )
        # A stale marker from an older copy must not vouch for the new file in the window between.
        marker_path(self.final).unlink(missing_ok=True)
        os.replace(self.path, self.final)
        write_marker(self.final, actual_sha)
        return self.final

    def discard(self) -> None:
        """Close and delete the `.part` file."""
        self._file.close()
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._file.close()
        # An empty .part is nothing to resume from, only litter.
        if exc_type is not None and (not self.keep_on_error or self.size == 0):
            self.path.unlink(missing_ok=True)
