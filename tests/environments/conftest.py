"""Folders the sandbox tests share: one outside /tmp (whose private copy would hide it anyway) and a
HOME made there."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp, readable by everyone, so that what keeps a command out is the sandbox
    and not a permission."""
    base = Path("/var/tmp")
    if not base.is_dir():
        pytest.skip("no /var/tmp")
    folder = Path(tempfile.mkdtemp(prefix="whiz-box-", dir=base))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def home(outside: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary HOME outside /tmp."""
    path = outside / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path
