import hashlib
import os
from pathlib import Path

import pytest

from whiz.models import verify
from whiz.models.verify import is_verified, marker_path, read_marker, sha256_file


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"x" * 3_000_000)  # spans several 1 MiB read blocks
    return path


def test_sha256_streams_the_whole_file(model: Path):
    assert sha256_file(model) == hashlib.sha256(model.read_bytes()).hexdigest()


def test_first_check_hashes_and_marks_then_later_checks_trust_the_marker(model: Path, monkeypatch):
    sha = sha256_file(model)
    assert is_verified(model, size=model.stat().st_size, sha256=sha)
    assert read_marker(model) == sha

    def no_rehash(path: Path) -> str:
        raise AssertionError("rehashed a file with a valid marker")

    monkeypatch.setattr(verify, "sha256_file", no_rehash)
    assert is_verified(model, size=model.stat().st_size, sha256=sha)


def test_a_changed_file_is_rehashed_and_refused(model: Path):
    sha = sha256_file(model)
    assert is_verified(model, size=None, sha256=sha)
    model.write_bytes(b"y" * 3_000_000)  # same size, new content
    stat = model.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert read_marker(model) is None
    assert not is_verified(model, size=3_000_000, sha256=sha)


def test_wrong_size_fails_without_hashing(model: Path):
    assert not is_verified(model, size=1, sha256=sha256_file(model))


def test_unknown_hash_counts_only_with_a_marker(model: Path):
    assert not is_verified(model, size=None, sha256=None)
    verify.write_marker(model, sha256_file(model))
    assert is_verified(model, size=None, sha256=None)


def test_garbage_marker_is_ignored(model: Path):
    marker_path(model).write_text("not json")
    assert read_marker(model) is None
    assert is_verified(model, size=None, sha256=sha256_file(model))


def test_marker_for_a_different_hash_does_not_vouch(model: Path):
    # E.g. the registry now pins a newer build of the file than the one on disk.
    verify.write_marker(model, sha256_file(model))
    assert not is_verified(model, size=None, sha256="0" * 64)
