"""Writing a file so that a crash, even a kill -9 or a power cut, leaves its old text or its new text.

The new text goes to a temporary file beside the target, is flushed to disk (fsync), and is then
renamed over the target: `os.replace` is atomic, so the path always names one whole version. The
folder is fsynced after the rename, or the rename itself could be lost in a power cut.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from pathlib import Path

# The temporary files whiz leaves beside a target while writing it: `.<name>.whiz-tmp-<8 hex>`, and
# `.whiz-bak-` for the originals older versions of whiz set aside. Distinctive enough that a sweep
# after a crash removes only ours.
LEFTOVER = re.compile(r"^\..+\.whiz-(tmp|bak)-[0-9a-f]{8}$")


def temp_beside(target: Path, kind: str = "tmp") -> Path:
    """A fresh temporary path in `target`'s folder (the same file system, so a rename is atomic)."""
    return target.with_name(f".{target.name}.whiz-{kind}-{secrets.token_hex(4)}")


def sha256(data: bytes | None) -> str | None:
    """The hex sha256 of `data`; None stands for an absent file."""
    return None if data is None else hashlib.sha256(data).hexdigest()


def digest_of(path: Path) -> str | None:
    """The sha256 of the file at `path`, or None when there is no file there."""
    try:
        return sha256(path.read_bytes())
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def write_temp(target: Path, data: bytes, mode: int | None = None, temp: Path | None = None) -> Path:
    """`data` in a new, fsynced temporary file beside `target` (at `temp` if given); returns its path.

    `mode` sets its permission bits; None leaves them to the umask, as for a file any editor creates.
    """
    temp = temp or temp_beside(target)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            if mode is not None:
                os.chmod(temp, mode)
            os.fsync(out.fileno())
    except OSError:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return temp


def fsync_dir(folder: Path) -> None:
    """Make renames and deletions in `folder` durable. Some file systems cannot: that is not an error."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_durably(target: Path, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `target` through a temporary file: old or new text, never a mix, after a crash."""
    temp = write_temp(target, data, mode)
    try:
        os.replace(temp, target)
    except OSError:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    fsync_dir(target.parent)


def remove_durably(target: Path) -> None:
    """Delete `target` (if there) and make the deletion durable."""
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    fsync_dir(target.parent)
