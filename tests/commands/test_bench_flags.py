"""The bench commands' flags and `whiz setup`'s are what scripts and the benchmark notes call: each
keeps its name, its default, its environment variable, its bounds, and what it hands the bench.
`bench_flags.json` pinned them as the hand-written options declared them, before they were made
from settings objects (`whiz.bench.options`, `whiz.commands.setup`); a change shows here, on
purpose (`CHANGED`, with its reason) or not. Regenerate it only for a change you mean:
`python -m tests.commands.test_bench_flags`."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from whiz.cli import app

PINNED = Path(__file__).with_name("bench_flags.json")

BENCH_MODULES = {
    # Each bench command, the module whose `main` it hands its plan to.
    "serve": "whiz.bench.serve",
    "prefix-cache": "whiz.bench.prefix_cache",
    "complete": "whiz.bench.complete",
    "engine": "whiz.bench.engine",
    "stall": "whiz.bench.stall",
    "codex-restart": "whiz.bench.codex_restart",
    "soak": "whiz.bench.soak",
    "edits": "whiz.bench.edits",
    "tasks": "whiz.bench.tasks",
    "heal": "whiz.bench.heal",
    "agent": "whiz.bench.agent",
    "parallel": "whiz.bench.parallel",
    "gateway": "whiz.bench.gateway",
}
COMMANDS = (*(("bench", name) for name in BENCH_MODULES), ("setup",))


def _bound(param: Any, model: Any, side: str) -> Any:
    """A flag's least (`side` "min") or greatest value: click's, or the settings field's range."""
    if getattr(param, side) is not None or model is None:
        return getattr(param, side)
    kinds = {"min": ("ge", "gt"), "max": ("le", "lt")}[side]
    for meta in model.model_fields[param.name].metadata:
        for kind in kinds:
            if getattr(meta, kind, None) is not None:
                value = getattr(meta, kind)
                return value + (1 if kind == "gt" else -1 if kind == "lt" else 0)
    return None


def flags_of(path: tuple[str, ...]) -> dict[str, dict]:
    """A command's options by their spellings: default, environment variable, bounds, and how
    the command line reads them."""
    from whiz.commands.settings_options import settings_model

    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    model = settings_model(command)
    rows = {}
    for p in command.params:
        if p.param_type_name != "option" or p.name == "help":
            continue
        default = list(p.default) if isinstance(p.default, tuple) else p.default
        rows[" ".join(p.opts)] = {
            "off": list(p.secondary_opts),
            "default": str(default) if isinstance(default, Path) else default,
            "envvar": p.envvar,
            "repeated": p.multiple,
            "switch": p.is_flag,
            "type": p.type_descriptor.annotation.__name__,
            "min": _bound(p, model, "min"),
            "max": _bound(p, model, "max"),
        }
    return rows


def handed_on(path: tuple[str, ...], monkeypatch: pytest.MonkeyPatch, args: list[str]) -> str:
    """What the command, given `args`, hands the bench's `main` (or `whiz setup`'s `run_setup`)."""
    import importlib

    seen: list[str] = []

    def record(*a: Any, **k: Any) -> int:
        # The temporary folder differs by machine; the rest is the same everywhere.
        seen.append(repr((a, dict(sorted(k.items())))).replace(repr(Path(tempfile.gettempdir())), "TMP"))
        return 0

    if path == ("setup",):
        monkeypatch.setattr(importlib.import_module("whiz.commands.setup"), "run_setup", record)
    else:
        monkeypatch.setattr(importlib.import_module(BENCH_MODULES[path[1]]), "main", record)
    result = CliRunner().invoke(app, [*path, *args])
    assert result.exit_code == 0, result.output
    (call,) = seen
    return call


ARGS = {("setup",): ["codex"]}
"""What a command needs besides its defaults (setup's client)."""

CHANGED: dict[str, dict[str, Any]] = {}


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_flag_keeps_its_name_default_environment_variable_and_bounds(path):
    pinned = json.loads(PINNED.read_text())[" ".join(path)]["flags"]
    now = flags_of(path)
    expected = {flag: {**row, **CHANGED.get(flag, {})} for flag, row in pinned.items()}
    assert now == expected


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_the_defaults_reach_the_bench_as_before(path, monkeypatch, tmp_path):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    for name in ("WHIZ_API_KEY", "WHIZ_DEEP_BASE_URL", "WHIZ_DEEP_API_KEY", "WHIZ_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    pinned = json.loads(PINNED.read_text())[" ".join(path)]["handed_on"]
    assert handed_on(path, monkeypatch, ARGS.get(path, [])) == pinned


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_default_help_shows_is_the_settings_own(path):
    from tests.commands.test_agent_flags import assert_defaults_are_the_settings_own

    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    assert_defaults_are_the_settings_own(command, " ".join(path))


def test_a_bad_value_is_refused_with_the_flag_it_came_from():
    runner = CliRunner()
    for args, said in (
        (["bench", "serve", "--prefix-tokens", "100"], "--prefix-tokens: 0, or at least 1024"),
        (["bench", "soak", "--server-cpus", "3-1"], "--server-cpus must be a CPU list like 1, 0,2 or 2-3"),
        (["bench", "gateway", "--rounds", "0"], "--rounds must be at least 1, not 0"),
        (["bench", "agent", "--seeds", "0"], "--seeds must be at least 1, not 0"),
        (["bench", "prefix-cache", "--prefix-tokens", "1000"], "--prefix-tokens must be at least 1024"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert said in " ".join(result.output.split()), (args, result.output)
        assert "Traceback" not in result.output


def pin() -> dict[str, Any]:  # pragma: no cover - run by hand, to pin a change on purpose
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        for name in ("WHIZ_API_KEY", "WHIZ_DEEP_BASE_URL", "WHIZ_DEEP_API_KEY", "WHIZ_BASE_URL"):
            patch.delenv(name, raising=False)
        for path in COMMANDS:
            out[" ".join(path)] = {
                "flags": flags_of(path),
                "handed_on": handed_on(path, patch, ARGS.get(path, [])),
            }
    return out


if __name__ == "__main__":  # pragma: no cover
    PINNED.write_text(json.dumps(pin(), indent=1, sort_keys=True) + "\n")
    sys.exit(0)
