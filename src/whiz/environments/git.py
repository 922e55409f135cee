"""Running git for a question or a small job: its output, or None where git is missing or says no.

whiz asks git things it can do without (which files are tracked, a worktree, a line merge), so a
failure here is an answer ("no"), never an exception. stdin is closed so git never waits on a
prompt, and each call has a timeout so a hung git (a lock, a network filesystem) cannot hang whiz.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT_TIMEOUT_S = 60.0


def git(
    cwd: Path, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT_S
) -> subprocess.CompletedProcess[bytes] | None:
    """Run `git ARGS` in `cwd`. None when git cannot run or times out, and, with `check`, when it
    exits non-zero (without `check` the caller reads the exit status itself)."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if check and done.returncode != 0:
        return None
    return done
