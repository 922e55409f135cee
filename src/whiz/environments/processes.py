"""Whether a process is still there, for state that records its owner's pid (a background
server's state file, a heal copy's owner file)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def alive(pid: int) -> bool:
    """True while process `pid` runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    return True
