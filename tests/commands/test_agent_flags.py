"""The agent commands' flags are what users' scripts call: each keeps its name, its default and its
environment variable. `agent_flags.json` pinned them as the hand-written options declared them,
before they were made from settings objects (`whiz.commands.agent_options`); a change to a flag
shows here, on purpose (`CHANGED`, `ADDED`, each with its reason) or not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from whiz.cli import app

AGENT_COMMANDS = ("exec", "code", "resume", "heal", "swarm", "sandbox", "acp")
PINNED = Path(__file__).with_name("agent_flags.json")


def flags_of() -> dict[str, dict[str, dict]]:
    """Each agent command's options by their spellings: default, environment variable, and how
    the command line reads them."""
    group = typer.main.get_command(app)
    out: dict[str, dict[str, dict]] = {}
    for name in AGENT_COMMANDS:
        rows = {}
        for p in group.commands[name].params:
            if p.param_type_name != "option" or p.name == "help":
                continue
            default = list(p.default) if isinstance(p.default, tuple) else p.default
            rows[" ".join(p.opts)] = {
                "off": list(p.secondary_opts),
                "default": default,
                "envvar": p.envvar,
                "repeated": p.multiple,
                "switch": p.is_flag,
                "min": p.min,
            }
        out[name] = rows
    return out


CHANGED = {
    # None meant AgentConfig's budget, which help now shows; the settings refuse a negative one.
    "--instructions-tokens": {"default": 1200, "min": None},
}
ADDED = {
    # resume runs exec's session again: it takes every option exec does.
    "resume": {
        "--check",
        "--heal",
        "--instructions-tokens",
        "--deep-base-url",
        "--deep-model",
        "--deep-api-key",
        "--policy",
        "--policy-model-check",
    },
}


@pytest.mark.parametrize("command", AGENT_COMMANDS)
def test_every_flag_keeps_its_name_default_and_environment_variable(command):
    pinned = json.loads(PINNED.read_text())[command]
    now = flags_of()[command]
    expected = {flag: {**row, **CHANGED.get(flag, {})} for flag, row in pinned.items()}
    assert {flag: now.get(flag) for flag in pinned} == expected
    assert set(now) - set(pinned) == ADDED.get(command, set())


def test_the_environment_variables_reach_the_session(tmp_path, monkeypatch):
    import whiz.commands.exec

    seen = []
    monkeypatch.setattr(
        whiz.commands.exec, "exec_in_mode", lambda task, options, out: seen.append(options) or 0
    )
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    env = {
        "WHIZ_API_KEY": "fast-key",
        "WHIZ_IN_PROCESS": "1",
        "WHIZ_DEEP_BASE_URL": "http://deep:1",
        "WHIZ_DEEP_API_KEY": "deep-key",
        "WHIZ_SECRET_FILES": "config/prod.yaml",
    }
    result = CliRunner().invoke(app, ["exec", "do it"], env=env)
    assert result.exit_code == 0, result.output
    (options,) = seen
    assert (options.fast.api_key, options.fast.in_process) == ("fast-key", True)
    assert (options.deep.base_url, options.deep.api_key) == ("http://deep:1", "deep-key")
    assert options.agent.secrets.extra == ("config/prod.yaml",)
    assert str(options.mode) == "auto" and options.agent.approval.value == "auto-edit"
