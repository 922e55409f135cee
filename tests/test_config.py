"""The settings' layers: a config file that cannot be used is one clear error naming the file, and a
key that is no setting is refused, not ignored (a misspelt `kv_budget` would otherwise leave the
default in force without a word)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from whiz.cli import app
from whiz.config import load_settings
from whiz.errors import InvalidRequest

runner = CliRunner()


def test_a_missing_config_file_is_named(tmp_path):
    with pytest.raises(InvalidRequest, match="missing.toml"):
        load_settings(tmp_path / "missing.toml")


def test_a_config_file_that_is_not_toml_says_where(tmp_path):
    config = tmp_path / "whiz.toml"
    config.write_text("[serve]\nslots = \n")
    with pytest.raises(InvalidRequest, match=r"whiz\.toml.*line 2"):
        load_settings(config)


def test_serve_must_be_a_table(tmp_path):
    config = tmp_path / "whiz.toml"
    config.write_text("serve = 3\n")
    with pytest.raises(InvalidRequest, match=r"\[serve\]"):
        load_settings(config)


def test_an_unknown_key_is_refused_with_the_setting_it_resembles(tmp_path):
    config = tmp_path / "whiz.toml"
    config.write_text("[serve]\nkv_budget = 8192\n")
    with pytest.raises(InvalidRequest, match="kv_budget.*kv_budget_mb"):
        load_settings(config)


def test_the_command_says_it_in_one_line(tmp_path, monkeypatch):
    # A short path: a long one (pytest-xdist's temporary paths are longer) wraps at 80 columns.
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["serve", "--config", "missing.toml"])
    assert result.exit_code == 2 and "missing.toml" in result.output
    assert "Traceback" not in result.output


def test_the_message_keeps_its_brackets(tmp_path):
    config = tmp_path / "whiz.toml"
    config.write_text("[serve]\nkv_budget = 8192\n")
    result = runner.invoke(app, ["serve", "--config", str(config)], terminal_width=300)
    assert result.exit_code == 2 and "in the [serve] table" in " ".join(result.output.split())


def test_a_relative_workspace_is_taken_from_where_whiz_started(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert load_settings(workspace="project").workspace == tmp_path / "project"
    assert load_settings(workspace="~/project").workspace == tmp_path / "home" / "project"
