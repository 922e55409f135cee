"""Fixtures for the client matrix: each agent program installed once into the whiz cache (as a user
installs it), and driven against a real whiz server over the fake engine, whose script answers in
the model's own tool-call format: these tests prove the protocol, not the model's skill."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def npm_client(package: str, version: str, binary: str) -> Path:
    """The installed program `binary` of `package@version` (installed on first use); skips the test
    with the reason where npm or the registry is missing."""
    if shutil.which("npm") is None:
        pytest.skip(f"npm is not installed; {package} comes from npm")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "whiz"
    prefix = cache / f"{package.strip('@').replace('/', '-')}-{version}"
    path = prefix / "node_modules" / ".bin" / binary
    if not path.exists():
        with cache_lock(prefix):
            if not path.exists():
                _npm_install(prefix, f"{package}@{version}", path)
    return path


@contextmanager
def cache_lock(path: Path) -> Iterator[None]:
    """Hold `path`'s lock file while the block installs into (or first fills) `path`: the suite's
    tests run side by side (pytest-xdist), and two installs into one folder break it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _npm_install(prefix: Path, spec: str, path: Path) -> None:
    command = ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix), spec]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0 or not path.exists():
        pytest.skip(f"could not install {spec} from npm: {done.stderr.strip()[-300:]}")


def folders(tmp_path: Path) -> tuple[Path, Path]:
    """A client's working folder and a fresh HOME for its profile, both created."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    return work, home


def client_engine(n_ctx: int = 262144) -> dict:
    """`serve_fake`'s engine for a real client's turn: a window for the client's whole prompt (the
    fake counts a byte as a token) and no pretend prefill time (`token_s`): the clients' prompts
    run to tens of thousands of bytes, which slept seconds a request, and what the turn proves is
    the protocol, not a speed."""
    return {"n_ctx": n_ctx, "token_s": 0.0}
