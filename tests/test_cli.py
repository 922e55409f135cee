"""The CLI's bad-input paths: one clear line and a non-zero exit, never a traceback."""

import shutil
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from whiz.cli import app

runner = CliRunner()


def test_unknown_model_names_the_known_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    result = runner.invoke(app, ["serve", "--model", "nope"])
    assert result.exit_code == 2
    assert "Unknown model 'nope'" in result.output and "qwen2.5-coder-0.5b" in result.output
    assert "Traceback" not in result.output


def test_missing_model_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    result = runner.invoke(app, ["serve", "--model", str(tmp_path / "missing.gguf")])
    assert result.exit_code == 2 and "No such model file" in result.output


def test_models_path_of_a_model_not_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    result = runner.invoke(app, ["models", "path", "qwen2.5-coder-1.5b"])
    assert result.exit_code == 1 and "whiz models pull qwen2.5-coder-1.5b" in result.output


def test_bad_flag_value_is_refused():
    result = runner.invoke(app, ["serve", "--port", "notaport"])
    assert result.exit_code == 2 and "--port" in result.output


def test_help_explains_the_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("serve", "models", "bench"):
        assert command in result.output


def test_an_unknown_draft_model_fails_before_anything_is_pulled(tmp_path, monkeypatch):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    result = runner.invoke(app, ["serve", "--draft-model", "nope"])
    assert result.exit_code == 2 and "Unknown model 'nope'" in result.output
    assert not (tmp_path / "models").exists()


def test_the_fake_model_takes_only_the_fake_draft_model():
    result = runner.invoke(app, ["serve", "--model", "fake", "--draft-model", "qwen2.5-coder-0.5b"])
    assert result.exit_code == 2 and "--draft-model fake" in result.output


def test_serve_help_says_where_the_prefix_cache_lives_and_how_much_disk_it_may_take():
    result = runner.invoke(app, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for flag in ("--prefix-cache-dir", "--prefix-cache-gb", "--no-prefix-cache"):
        assert flag in result.output
    text = " ".join(result.output.replace("│", " ").split())  # rich's panel wraps the help column
    assert "[default: 4.0]" in text and "WHIZ_HOME/kv" in text


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (make sandbox)")
def test_whiz_sandbox_keeps_the_venv_read_only_unless_allow_env_writes(tmp_path, monkeypatch):
    site = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    plant = ["sh", "-c", f"echo 'import os' > {site}/evil.pth"]
    refused = runner.invoke(app, ["sandbox", "--", *plant])
    assert refused.exit_code != 0 and not (site / "evil.pth").exists()
    allowed = runner.invoke(app, ["sandbox", "--allow-env-writes", "--", *plant])
    assert allowed.exit_code == 0 and (site / "evil.pth").exists()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (make sandbox)")
def test_whiz_sandbox_hides_the_env_file_unless_allow_secret_reads(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("STRIPE_KEY=sk_live_4eC39HqLyjWDarjtT1zdp7dc\n")
    (tmp_path / "prod.cfg").write_text("password=hunter2hunter2\n")
    monkeypatch.chdir(tmp_path)
    hidden = runner.invoke(app, ["sandbox", "--secret-file", "*.cfg", "--", "sh", "-c", "cat .env prod.cfg"])
    assert hidden.exit_code != 0
    assert "sk_live" not in hidden.output and "hunter2" not in hidden.output
    allowed = runner.invoke(app, ["sandbox", "--allow-secret-reads", "--", "cat", ".env"])
    assert allowed.exit_code == 0 and "sk_live_4eC39HqLyjWDarjtT1zdp7dc" in allowed.output


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (make sandbox)")
def test_whiz_sandbox_shows_and_lets_through_what_is_allowed_from_the_home(tmp_path, monkeypatch):
    home = Path(tempfile.mkdtemp(prefix="whiz-cli-home-", dir="/var/tmp"))  # outside the private /tmp
    try:
        tool = home / ".config" / "mytool"
        tool.mkdir(parents=True)
        (tool / "hosts.yml").write_text("token: abc123token\n")
        (home / "other.txt").write_text("other-text\n")
        monkeypatch.setenv("HOME", str(home))
        config = tmp_path / "config.toml"
        config.write_text(f'[sandbox]\nallow = ["{home}/other.txt"]\n')
        monkeypatch.setenv("WHIZ_CONFIG", str(config))
        monkeypatch.chdir(tmp_path)
        read = ["sandbox", "--", "sh", "-c", f"cat {tool}/hosts.yml {home}/other.txt"]
        hidden = runner.invoke(app, read)
        assert "abc123token" not in hidden.output and "other-text" in hidden.output  # the config's
        assert f"allowed by you: {home}/other.txt" in hidden.output
        allowed = runner.invoke(app, [read[0], "--sandbox-allow", "~/.config/mytool", *read[1:]])
        assert allowed.exit_code == 0 and "abc123token" in allowed.output
        config.write_text('[sandbox]\nallows = ["~"]\n')
        wrong = runner.invoke(app, read)
        assert wrong.exit_code != 0 and "unknown key 'allows'" in wrong.output
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_every_command_that_runs_the_agent_offers_the_same_safety_flags():
    """A resumed session runs model-written commands too: a user who needed `--allow-env-writes` or
    `--allow-secret-reads` for `exec` must be able to say it again when resuming."""
    import typer.main

    from whiz.cli import app

    group = typer.main.get_command(app)
    safety = {"--sandbox", "--allow-env-writes", "--secret-file", "--allow-secret-reads", "--sandbox-allow"}
    for name in ("exec", "resume", "code", "heal", "swarm"):
        command = group.commands[name]
        flags = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert safety <= flags, f"whiz {name} lacks {sorted(safety - flags)}"
