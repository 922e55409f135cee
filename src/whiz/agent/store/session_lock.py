"""One process at a time holds a session: two whiz processes appending to one conversation would
interleave turns the model never saw together, and each would undo the other's files.

`SessionLock.acquire(home, session_id)` takes an exclusive `flock` on `home/locks/<id>.lock` and
writes the holder's pid into it; the kernel drops the lock when the process exits, however it
exits, so a crashed whiz never leaves a session locked.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from whiz.agent.errors import WhizAgentError


class SessionBusy(WhizAgentError):
    """Another process holds the session."""

    code = "session_busy"

    def __init__(self, session_id: str, pid: int | None):
        holder = f" (pid {pid})" if pid else ""
        super().__init__(f"session {session_id} is open in another whiz{holder}")
        self.pid = pid


class SessionLock:
    """The lock on one session, held until `release()`."""

    def __init__(self, home: Path, session_id: str, fd: int):
        self.home = home
        """The sessions home the lock lives under."""
        self.session_id = session_id
        self.path = home / "locks" / f"{session_id}.lock"
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, home: Path, session_id: str) -> SessionLock:
        """Hold `session_id`; raises `SessionBusy`, naming the holder's pid, if another process does."""
        path = home / "locks" / f"{session_id}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise SessionBusy(session_id, pid) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        return cls(home, session_id, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Let another process open the session (the file stays: removing it would race a new holder)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip() or 0) or None
    except (OSError, ValueError):
        return None
