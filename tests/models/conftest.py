"""Fixtures for the model tests: a tiny spec, a registry around it, and a fake pip serving its chunks."""

from __future__ import annotations

from pathlib import Path

import pytest

from whiz.models import ModelSpec, Registry

from .fakes import CHUNKS, FakePip, make_spec


@pytest.fixture
def spec() -> ModelSpec:
    return make_spec()


@pytest.fixture
def registry(spec: ModelSpec) -> Registry:
    return Registry([spec, make_spec("other")], default=spec.name)


@pytest.fixture
def fake_pip(tmp_path: Path, spec: ModelSpec) -> FakePip:
    index = tmp_path / "index"
    index.mkdir()
    pip = FakePip(index)
    pip.publish(spec, CHUNKS)
    return pip
