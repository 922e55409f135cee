"""requirements.lock is what `make` installs: every pin hashed, every pin within what pyproject.toml
asks, nothing pyproject asks left out, and the running environment built from it. A lock that drifts
from pyproject.toml (a dependency added by hand, a range narrowed) fails here, not on a newcomer's
machine next month; `make lock` writes it afresh."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
# Built for this CPU by scripts/ensure_llama.sh, so it has no pin; the lock holds its dependencies.
BUILT_HERE = {"llama-cpp-python"}


def locked() -> list[tuple[str, Version, Marker | None, list[str]]]:
    """(name, version, marker, hashes) for each pin: `name==version ; marker \\` then `--hash=` lines."""
    text = (ROOT / "requirements.lock").read_text()
    pins = []
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        head = block.split("\\", 1)[0].strip()
        if not head or head.startswith("#"):
            continue
        spec, _, marker = head.partition(";")
        name, sep, version = spec.strip().partition("==")
        assert sep, f"requirements.lock: {head!r} is not an exact pin"
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", block)
        pins.append(
            (canonicalize_name(name), Version(version), Marker(marker) if marker.strip() else None, hashes)
        )
    return pins


def here(pins):
    """The pins this interpreter installs (numpy, for one, has one pin per Python range)."""
    return {name: version for name, version, marker, _ in pins if marker is None or marker.evaluate()}


def required() -> list[Requirement]:
    """pyproject.toml's dependencies and its test extra, the set `make test` installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["test"]
    return [Requirement(line) for line in wanted]


def test_every_pin_is_exact_and_hashed():
    pins = locked()
    assert len(pins) > 20
    unhashed = [name for name, _, _, hashes in pins if not hashes]
    assert not unhashed, f"pins without a hash (pip's --require-hashes refuses them): {unhashed}"


def test_the_lock_holds_what_pyproject_asks_within_its_ranges():
    pins = here(locked())
    for requirement in required():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        if name in BUILT_HERE:
            assert name not in pins, f"{name} is built for this CPU; the lock must not pin it"
            continue
        assert name in pins, f"pyproject.toml asks for {requirement}; requirements.lock has no pin"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {name}=={pins[name]}, outside pyproject.toml's {requirement}; "
            "run `make lock`"
        )


def test_llama_cpp_python_dependencies_are_locked():
    # It is installed with --no-deps: what it imports must come from the lock.
    pins = here(locked())
    assert {"jinja2", "diskcache", "numpy"} <= set(pins)


def test_this_environment_is_the_lock():
    """What `make` installed is what the lock pins (a stale .venv reinstalls when the lock changes)."""
    pins = here(locked())
    try:
        metadata.version("whiz")
    except metadata.PackageNotFoundError:
        pytest.skip("whiz is not installed in this environment")
    differ = {}
    for name, version in pins.items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            differ[name] = (version, None)
            continue
        if installed != version:
            differ[name] = (version, installed)
    assert not differ, f"installed packages differ from requirements.lock (locked, installed): {differ}"
