"""Fixtures for the client matrix: each agent program installed once into the whiz cache (as a user
installs it), and driven against a real whiz server over the fake engine, whose script answers in
the model's own tool-call format: these tests prove the protocol, not the model's skill."""

from __future__ import annotations

import os
import shutil
import subprocess
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
        command = ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix)]
        done = subprocess.run(
            [*command, f"{package}@{version}"], capture_output=True, text=True, timeout=900, check=False
        )
        if done.returncode != 0 or not path.exists():
            pytest.skip(f"could not install {package}@{version} from npm: {done.stderr.strip()[-300:]}")
    return path


def folders(tmp_path: Path) -> tuple[Path, Path]:
    """A client's working folder and a fresh HOME for its profile, both created."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    return work, home
