"""Configuring upstreams: flags, environment and config-file tables, and the clear errors of bad ones."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from whiz.cli import app
from whiz.config import load_settings
from whiz.errors import InvalidRequest
from whiz.gateway import build_gateway, upstream_configs

runner = CliRunner()


def test_config_file_tables_flags_and_environment_combine(tmp_path, monkeypatch):
    config = tmp_path / "whiz.toml"
    config.write_text(
        "[serve]\n"
        'upstreams = [{url = "http://gpu1:8000", key_env = "GPU1_KEY", model = "qwen"}, "http://gpu2:8000/v1"]\n'
        'routing = "round-robin"\n'
    )
    monkeypatch.setenv("GPU1_KEY", "secret-1")
    monkeypatch.setenv("WHIZ_UPSTREAM_KEY", "shared")
    settings = load_settings(config)
    first, second = upstream_configs(settings)
    assert (first.url, first.key, first.model) == ("http://gpu1:8000", "secret-1", "qwen")
    assert (second.key, second.model) == ("shared", None)
    gateway = build_gateway(settings)
    assert [r.name for r in gateway.router.replicas] == ["http://gpu1:8000", "http://gpu2:8000"]
    assert gateway.router.policy == "round-robin"
    # Flags win over the file.
    assert load_settings(config, upstreams=["http://other:1"]).upstreams == ["http://other:1"]


def test_upstreams_from_the_environment_are_a_comma_separated_list(monkeypatch):
    monkeypatch.setenv("WHIZ_UPSTREAMS", "http://a:1, http://b:2")
    assert load_settings().upstreams == ["http://a:1", "http://b:2"]


def test_a_key_variable_that_is_not_set_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("NOPE_KEY", raising=False)
    settings = load_settings(upstreams=[{"url": "http://a:1", "key_env": "NOPE_KEY"}])
    with pytest.raises(InvalidRequest, match="NOPE_KEY is not set"):
        upstream_configs(settings)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--upstream", "http://a:1", "--upstream", "http://a:1/v1"], "given twice"),
        (["--upstream", "ftp://a"], "Bad upstream URL"),
        (["--upstream", "http://a:1", "--routing", "random"], "Invalid setting 'routing'"),
        (["--upstream", "http://a:1", "--engine-only"], "does not go with --upstream"),
    ],
)
def test_bad_upstream_flags_are_one_clear_line(args, says):
    result = runner.invoke(app, ["serve", *args])
    assert result.exit_code == 2
    assert says in result.output and "Traceback" not in result.output
