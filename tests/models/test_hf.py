from pathlib import Path

import httpx
import pytest

from whiz.models import ModelDownloadError, ModelSpec, ModelVerifyError
from whiz.models.hf import HFSource

from .fakes import CONTENT


class FakeHub:
    """A tiny hub: serves files by path, honours Range, and records the requests it saw."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.host == "huggingface.co":
            # Like the real hub: redirect to the CDN.
            return httpx.Response(302, headers={"Location": f"https://cdn.example{request.url.path}"})
        body = self.files.get(request.url.path)
        if body is None:
            return httpx.Response(404)
        if (rng := request.headers.get("Range")) is not None:
            start = int(rng.removeprefix("bytes=").rstrip("-"))
            if start >= len(body):
                return httpx.Response(416)
            headers = {"Content-Range": f"bytes {start}-{len(body) - 1}/{len(body)}"}
            return httpx.Response(206, content=body[start:], headers=headers)
        return httpx.Response(200, content=body)


def source(hub: FakeHub, token: str | None = "") -> HFSource:
    return HFSource(httpx.Client(transport=httpx.MockTransport(hub)), token=token)


@pytest.fixture
def hub(spec: ModelSpec) -> FakeHub:
    return FakeHub({f"/{spec.hf_repo}/resolve/main/{spec.hf_file}": CONTENT})


def test_downloads_follows_redirect_and_verifies(tmp_path: Path, spec: ModelSpec, hub: FakeHub):
    dest = tmp_path / spec.filename
    assert source(hub).fetch(spec, dest) == dest
    assert dest.read_bytes() == CONTENT
    assert [r.url.host for r in hub.requests] == ["huggingface.co", "cdn.example"]
    assert not dest.with_name(dest.name + ".part").exists()


def test_token_is_sent_to_the_hub_but_not_to_the_cdn(tmp_path: Path, spec: ModelSpec, hub: FakeHub):
    source(hub, token="secret").fetch(spec, tmp_path / spec.filename)
    assert hub.requests[0].headers["Authorization"] == "Bearer secret"
    assert "Authorization" not in hub.requests[1].headers


def test_token_comes_from_hf_token_env(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "from-env")
    assert HFSource().token == "from-env"


def test_404_is_a_clear_download_error_and_leaves_no_files(tmp_path: Path, spec: ModelSpec):
    with pytest.raises(ModelDownloadError, match="404") as info:
        source(FakeHub({})).fetch(spec, tmp_path / spec.filename)
    assert spec.hf_repo in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_resume_asks_only_for_the_missing_bytes(tmp_path: Path, spec: ModelSpec, hub: FakeHub):
    dest = tmp_path / spec.filename
    dest.with_name(dest.name + ".part").write_bytes(CONTENT[:100])
    source(hub).fetch(spec, dest)
    assert hub.requests[-1].headers["Range"] == "bytes=100-"
    assert dest.read_bytes() == CONTENT


def test_server_ignoring_range_restarts_cleanly(tmp_path: Path, spec: ModelSpec):
    class NoRangeHub(FakeHub):
        def __call__(self, request: httpx.Request) -> httpx.Response:
            self.requests.append(request)
            return httpx.Response(200, content=CONTENT)

    dest = tmp_path / spec.filename
    dest.with_name(dest.name + ".part").write_bytes(b"stale garbage")
    source(NoRangeHub({})).fetch(spec, dest)
    assert dest.read_bytes() == CONTENT


def test_interrupted_download_keeps_part_for_resume(tmp_path: Path, spec: ModelSpec):
    def broken(request: httpx.Request) -> httpx.Response:
        def body():
            yield CONTENT[:50]
            raise httpx.ReadError("connection reset")

        return httpx.Response(200, content=body())

    dest = tmp_path / spec.filename
    with pytest.raises(ModelDownloadError, match="resume"):
        HFSource(httpx.Client(transport=httpx.MockTransport(broken)), token="").fetch(spec, dest)
    assert not dest.exists()
    assert dest.with_name(dest.name + ".part").read_bytes() == CONTENT[:50]


def test_wrong_content_is_refused(tmp_path: Path, spec: ModelSpec):
    hub = FakeHub({f"/{spec.hf_repo}/resolve/main/{spec.hf_file}": CONTENT[::-1]})
    dest = tmp_path / spec.filename
    with pytest.raises(ModelVerifyError):
        source(hub).fetch(spec, dest)
    assert list(tmp_path.iterdir()) == []
