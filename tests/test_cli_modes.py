"""Bad input to `whiz heal`, `whiz swarm`, `whiz bench heal` and the mode flags: one clear line, exit 2."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from whiz.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["heal", "fix it", "--test-cmd", "  "], "--test-cmd is empty"),
        (["heal", "  ", "--test-cmd", "true"], "the task is empty"),
        (["heal", "fix it", "--test-cmd", "true", "-n", "0"], "-n must be between 1 and 16"),
        (["heal", "fix it", "--test-cmd", "true", "--temperature", "3"], "--temperature"),
        (["heal", "fix it", "--test-cmd", "true", "--mode", "turbo"], "fast, deep or auto"),
        (["swarm", "do it", "--workers", "0"], "--workers must be between 1 and 16"),
        (["swarm", "do it", "--policy", "maybe"], "allow, reroute:deep or refuse"),
        (["exec", "do it", "--mode", "slow"], "--mode must be fast, deep or auto, not 'slow'"),
        (
            ["exec", "do it", "--heal", "3", "--test-cmd", "true", "--actions", "tools"],
            "--heal needs --actions text",
        ),
        (["bench", "heal", "--variants", "fast,magic"], "--variants"),
        (["code", "--mode", "turbo"], "fast, deep or auto"),
        (["code", "--last", "--mode", "turbo"], "fast, deep or auto"),
        (["resume", "go on", "--last", "--mode", "slow"], "fast, deep or auto"),
        (["code", "--policy", "maybe"], "allow, reroute:deep or refuse"),
        (["code", "--heal", "40", "--test-cmd", "true"], "--heal takes a number of candidates from 0"),
        (
            ["exec", "do it", "--approval", "yes"],
            "--approval must be read-only, auto-edit or full-auto, not 'yes'",
        ),
        (["exec", "do it", "--actions", "json"], "--actions must be text or tools, not 'json'"),
        (["exec", "do it", "--sandbox", "none"], "--sandbox must be one of read-only, workspace-write"),
        (["exec", "do it", "--instructions-tokens", "-1"], "--instructions-tokens must be at least 0"),
        (["resume", "go on", "--last", "--sandbox", "none"], "--sandbox must be one of"),
        (["acp", "--approval", "ask"], "--approval must be read-only"),
        (["swarm", "do it", "--retries", "-1"], "--retries must be at least 0, not -1"),
        (["swarm", "do it", "--check-timeout", "0"], "--check-timeout must be greater than 0"),
        (["heal", "fix it", "--test-cmd", "true", "--rounds", "0"], "--rounds must be at least 1"),
        (
            ["heal", "fix it", "--test-cmd", "true", "--test-timeout", "0"],
            "--test-timeout must be greater than 0",
        ),
        (["sandbox", "--mode", "bad", "--", "true"], "--mode must be one of read-only, workspace-write"),
        (["sandbox", "--timeout", "0", "--", "true"], "--timeout must be greater than 0"),
    ],
)
def test_bad_options_get_one_clear_line(tmp_path, monkeypatch, args, message):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_heal_needs_a_test_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["heal", "fix it"])
    assert result.exit_code == 2 and "--test-cmd" in result.output


def test_the_help_explains_modes_healing_and_the_swarm():
    for command, words in [
        (["heal", "--help"], ["smallest diff", "whiz undo", "--sequential", "first to pass ends the round"]),
        (["swarm", "--help"], ["director", "--workers", "Conflicting"]),
        (["exec", "--help"], ["--mode", "--deep-base-url", "--policy"]),
        (["code", "--help"], ["--mode", "--deep-base-url", "--policy", "/mode shows it and switches"]),
    ]:
        result = runner.invoke(app, command, terminal_width=200)
        assert result.exit_code == 0
        text = " ".join(result.output.split())
        for word in words:
            assert word in text, (command, word)


@pytest.mark.parametrize(
    "args",
    [
        ["heal", "fix it", "--test-cmd", "true"],
        ["swarm", "do it"],
        ["exec", "do it"],
    ],
)
def test_the_shared_server_flags_reach_every_agent_command(tmp_path, monkeypatch, args):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    url = "http://127.0.0.1:9"
    result = runner.invoke(app, [*args, "--base-url", url, "--api-key", "k", "--json"])
    assert result.exit_code == 2, result.output
    assert f"no whiz server answers at {url}" in result.output


def test_exec_and_the_swarm_start_in_auto_mode_and_the_others_in_fast():
    modes = (
        ("swarm", "auto"),
        ("heal", "fast"),
        ("exec", "auto"),
        ("code", "(fast, or the resumed session's)"),
    )
    for command, default in modes:
        lines = runner.invoke(app, [command, "--help"], terminal_width=200).output.splitlines()
        start = next(i for i, line in enumerate(lines) if re.match(r"│ {1,4}--mode ", line))
        end = next(i for i in range(start + 1, len(lines)) if re.match(r"│ {1,4}-", lines[i]))
        text = " ".join(line.strip("│ ") for line in lines[start:end])
        assert f"[default: {default}]" in text, (command, text)


def test_the_mode_help_comes_from_the_mode_registry(monkeypatch):
    from whiz.modes.registry import mode_help

    # Rich sizes help from COLUMNS (CliRunner's terminal_width does not reach it); at 80 columns a
    # word longer than the help column is cut with an ellipsis, which this comparison would see.
    monkeypatch.setenv("COLUMNS", "200")
    for command in ("exec", "heal", "swarm", "code"):
        output = runner.invoke(app, [command, "--help"]).output
        text = " ".join(output.replace("│", " ").split())
        assert " ".join(mode_help().split()) in text, command
