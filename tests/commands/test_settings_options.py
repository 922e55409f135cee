"""`whiz serve`'s options are the settings model's fields: one option per field, its help the field's
description, its shown default the field's default, and what it sets the field it is named after."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import UnionType
from typing import Any, Literal, get_args, get_origin

import pytest
import typer
from typer.testing import CliRunner

from whiz.cli import app
from whiz.config import ServeSettings

runner = CliRunner()
FIELDS = list(ServeSettings.model_fields)
WHIZ = typer.main.get_command(app)  # made once: the tests below only parse


def serve_options() -> dict[str, Any]:
    """`whiz serve`'s options by name (typer's click objects: typer may ship its own click)."""
    serve = WHIZ.commands["serve"]
    return {p.name: p for p in serve.params if p.param_type_name == "option" and p.name}


@pytest.fixture
def served(monkeypatch):
    """Run `whiz serve ARGS` up to the settings it would serve with, and return those."""
    import whiz.commands.serve

    seen: list[ServeSettings] = []
    monkeypatch.setattr(whiz.commands.serve, "serve_forever", lambda settings, console: seen.append(settings))
    for name in FIELDS:
        monkeypatch.delenv(f"WHIZ_{name.upper()}", raising=False)

    def serve(*args: str) -> ServeSettings:
        WHIZ.main(["serve", *args], prog_name="whiz", standalone_mode=False)
        return seen.pop()

    return serve


@pytest.mark.parametrize("name", FIELDS)
def test_each_setting_is_an_option_with_its_description_and_default(name):
    field = ServeSettings.model_fields[name]
    option = serve_options().get(name)
    assert field.description, f"ServeSettings.{name} has no description: its help would be empty"
    assert option is not None, f"ServeSettings.{name} has no `whiz serve` option"
    assert option.help is not None and option.help.startswith(field.description)
    default = field.get_default(call_default_factory=True)
    assert option.default == (None if default == [] else default)
    assert option.show_default is True


def sample(name: str, option: Any) -> tuple[list[str], object]:
    """Arguments that set the setting `name` to something other than its default, and that value."""
    field = ServeSettings.model_fields[name]
    flag = option.opts[0]
    kind = field.annotation
    if get_origin(kind) is UnionType:  # X | None
        kind = next(t for t in get_args(kind) if t is not type(None))
    if kind is bool:
        return ([option.secondary_opts[0]] if field.default else [flag]), not field.default
    if get_origin(kind) is list:
        return [flag, "http://a:1", flag, "http://b:2"], ["http://a:1", "http://b:2"]
    if get_origin(field.annotation) is Literal:
        other = next(c for c in get_args(field.annotation) if c != field.default)
        return [flag, other], other
    values = {int: ("300", 300), float: ("2.5", 2.5), str: ("x-y", "x-y"), Path: ("/tmp/w", Path("/tmp/w"))}
    text, value = values[kind]
    return [flag, text], value


@pytest.mark.parametrize("name", FIELDS)
def test_each_option_sets_the_setting_it_is_named_after(name, served):
    option = serve_options().get(name)
    assert option is not None, f"ServeSettings.{name} has no `whiz serve` option"
    args, value = sample(name, option)
    assert getattr(served(*args), name) == value


@pytest.mark.parametrize("name", FIELDS)
def test_each_setting_is_read_from_the_environment(name, served, monkeypatch):
    args, value = sample(name, serve_options()[name])
    text = (
        ",".join(value)
        if isinstance(value, list)
        else str(value).lower()
        if isinstance(value, bool)
        else args[-1]
    )
    monkeypatch.setenv(f"WHIZ_{name.upper()}", text)
    assert getattr(served(), name) == value


def test_the_help_shows_the_defaults_the_server_uses():
    result = runner.invoke(app, ["serve", "--help"], terminal_width=300, env={"NO_COLOR": "1"})
    text = " ".join(result.output.split())
    assert result.exit_code == 0
    assert "--kv-budget-mb" in text and "[default: 4096]" in text and "2048" not in text
    assert "--temperature" in text and "[default: 0.7]" in text


def test_flags_win_over_the_environment_which_wins_over_the_file(served, tmp_path, monkeypatch):
    config = tmp_path / "whiz.toml"
    config.write_text('[serve]\nport = 1111\nslots = 3\nhost = "127.0.0.2"\nspeculation = false\n')
    monkeypatch.setenv("WHIZ_PORT", "2222")
    monkeypatch.setenv("WHIZ_SLOTS", "5")
    settings = served("--config", str(config), "--port", "3333")
    assert (settings.port, settings.slots, settings.host) == (3333, 5, "127.0.0.2")
    # A switch left off the command line leaves the file's value, not the default.
    assert settings.speculation is False
    assert served("--config", str(config), "--speculation").speculation is True


def test_the_older_spellings_still_work(served):
    settings = served("--idle-exit", "60", "--api-key", "a", "--api-key", "b", "--engine-only")
    assert (settings.idle_exit_s, settings.api_keys, settings.engine_only) == (60, ["a", "b"], True)
    assert served("--allowed-host", "h", "--allowed-origin", "http://o:1", "--upstream", "http://u:1") == (
        ServeSettings(allowed_hosts=["h"], allowed_origins=["http://o:1"], upstreams=["http://u:1"])
    )


@pytest.mark.parametrize("args", [["--help"], ["undo", "--help"], ["models", "list", "--help"]])
def test_other_commands_do_not_load_the_settings_models(args):
    # Building a command's options from settings imports pydantic and the settings (serve's, the
    # agent's): a cost only the command that has them pays, not the list of commands nor another.
    code = (
        "import sys; from typer.main import get_command; from whiz.cli import app; "
        f"get_command(app).main({args!r}, standalone_mode=False); "
        "print('whiz.config' in sys.modules, 'whiz.commands.agent_options' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False False"


def test_the_agent_commands_do_not_load_the_server_settings():
    # ServeSettings takes a tenth of a second to build on a busy machine: `whiz exec` never needs it.
    code = (
        "import sys; from typer.main import get_command; from whiz.cli import app; "
        "get_command(app).main(['exec', '--help'], standalone_mode=False); "
        "print('whiz.config' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False"
