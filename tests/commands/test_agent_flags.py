"""The agent commands' flags are what users' scripts call: each keeps its name, its default and its
environment variable. `agent_flags.json` pinned them as the hand-written options declared them,
before they were made from settings objects (`whiz.commands.agent_options`); a change to a flag
shows here, on purpose (`CHANGED`, `ADDED`, each with its reason) or not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from whiz.cli import app
from whiz.commands.settings_options import flag_of, settings_model

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
        "--found-checks",
        "--heal-budget",
        "--mutants",
        "--trace",
        "--exact-renames",
    },
    # The checks found in the user's code (agent/project/found_checks.py), on by default; a healing
    # step's time budget (HealSettings.budget_s), its mutants and its trace of the failing call; a
    # rename done on the tokens (agent/editing/rename.py), on by default.
    "exec": {"--found-checks", "--heal-budget", "--mutants", "--trace", "--exact-renames"},
    "code": {"--found-checks", "--heal-budget", "--mutants", "--trace", "--exact-renames"},
    "acp": {"--found-checks", "--heal-budget", "--mutants", "--trace", "--exact-renames"},
    # A heal's time budget (HealSettings.budget_s); its one-token changes (HealSettings.mutants).
    "heal": {"--budget", "--mutants", "--trace"},
}


@pytest.mark.parametrize("command", AGENT_COMMANDS)
def test_every_flag_keeps_its_name_default_and_environment_variable(command):
    pinned = json.loads(PINNED.read_text())[command]
    now = flags_of()[command]
    expected = {flag: {**row, **CHANGED.get(flag, {})} for flag, row in pinned.items()}
    assert {flag: now.get(flag) for flag in pinned} == expected
    assert set(now) - set(pinned) == ADDED.get(command, set())


@pytest.fixture
def exec_sessions(tmp_path, monkeypatch) -> list:
    """The session options each `whiz exec` run in this test would open, none opened."""
    import whiz.commands.exec

    seen: list = []
    monkeypatch.setattr(
        whiz.commands.exec, "exec_in_mode", lambda task, options, out: seen.append(options) or 0
    )
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return seen


def test_the_environment_variables_reach_the_session(exec_sessions):
    seen = exec_sessions
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


DEFAULT_IN_PROSE = re.compile(r"\(default|\bdefault[:;]|\bDefault\b|\bby default\b")


def assert_defaults_are_the_settings_own(click_command, command: str) -> None:
    """Help says a flag's default only in its `[default: ...]`, and that is the field's default
    (or, for a default decided later, the words its `Flag` gives): never in the help's prose,
    where nothing would keep it true."""
    model = settings_model(click_command)
    assert model is not None, f"whiz {command}'s options are not made from settings"
    for param in click_command.params:
        if param.param_type_name != "option" or param.name == "help":
            continue
        field = model.model_fields[param.name]
        default = field.get_default(call_default_factory=True)
        assert param.default == (None if default == [] else default), (command, param.name)
        shown = flag_of(field).shown
        assert param.show_default == (shown if default is None and shown else True), (command, param.name)
        assert not DEFAULT_IN_PROSE.search(field.description or ""), (command, param.name, field.description)


@pytest.mark.parametrize("command", AGENT_COMMANDS)
def test_every_default_help_shows_is_the_settings_own(command):
    assert_defaults_are_the_settings_own(typer.main.get_command(app).commands[command], command)


def test_the_defaults_are_those_the_library_uses():
    from whiz.agent.config import AgentConfig
    from whiz.commands.agent_options import ExecOptions, HealOptions
    from whiz.config_file import ConfigFile
    from whiz.environments import SandboxOptions
    from whiz.modes.healing import HealSettings
    from whiz.modes.session import SessionOptions

    options = ExecOptions()
    agent = options.agent_config()
    assert (agent.approval, agent.instructions_tokens) == (
        AgentConfig().approval,
        AgentConfig().instructions_tokens,
    )
    assert options.confinement(options.sandbox, ConfigFile(Path("absent.toml"))).mode == SandboxOptions().mode
    assert options.policy == SessionOptions(Path(".")).policy
    with pytest.raises(ValueError, match=f"between 1 and {HealSettings.MAX_N}"):
        HealOptions(test_cmd="true", n=HealSettings.MAX_N + 1)
    # `--budget 0` is a heal with no time bound; a bound is what the heal stops at.
    sandbox = SandboxOptions()
    assert HealOptions(test_cmd="true", budget=0).heal_settings(sandbox).budget_s is None
    assert HealOptions(test_cmd="true", budget=30).heal_settings(sandbox).budget_s == 30
    assert HealOptions(test_cmd="true").heal_settings(sandbox).trace is True
    assert HealOptions(test_cmd="true", trace=False).heal_settings(sandbox).trace is False
    with pytest.raises(ValueError):
        HealOptions(test_cmd="true", budget=-1)


def test_the_environment_reaches_plain_whiz_too(tmp_path, monkeypatch):
    import whiz.tui

    seen = []
    monkeypatch.setattr(whiz.tui, "run_code", lambda options: seen.append(options) or 0)
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [], env={"WHIZ_API_KEY": "k", "WHIZ_IN_PROCESS": "1"})
    assert result.exit_code == 0, result.output
    (options,) = seen
    assert (options.fast.api_key, options.fast.in_process, options.mode) == ("k", True, None)


def test_one_config_file_is_read_once_for_the_sandbox_and_the_mcp_servers(tmp_path, monkeypatch):
    import whiz.commands.exec
    from whiz.config_file import ConfigFile

    seen, reads = [], []
    read = ConfigFile.read.__func__
    monkeypatch.setattr(
        ConfigFile, "read", classmethod(lambda cls, *a, **k: reads.append(a) or read(cls, *a, **k))
    )
    monkeypatch.setattr(
        whiz.commands.exec, "exec_in_mode", lambda task, options, out: seen.append(options) or 0
    )
    config = tmp_path / "config.toml"
    config.write_text('[sandbox]\nallow = ["~/.config/tool"]\n[mcp_servers.files]\ncommand = "true"\n')
    monkeypatch.setenv("WHIZ_CONFIG", str(config))
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())  # as if the MCP SDK were there
    result = CliRunner().invoke(app, ["exec", "do it"])
    assert result.exit_code == 0, result.output
    (options,) = seen
    assert [s.name for s in options.mcp] == ["files"]
    assert options.agent.sandbox.allow == (Path("~/.config/tool"),)
    assert len(reads) == 1


def test_a_config_file_that_is_not_toml_stops_an_agent_command_with_one_line(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text("[sandbox\n")
    monkeypatch.setenv("WHIZ_CONFIG", str(config))
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for args in (["exec", "do it"], ["sandbox", "--", "true"], ["heal", "fix", "--test-cmd", "true"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        # Compared without white space: the console may wrap a long path at any character.
        said = "".join(result.output.split())
        assert "".join(f"The config file {config} is not valid TOML".split()) in said, args
        assert "Traceback" not in result.output


def test_no_found_checks_reaches_the_agent(exec_sessions):
    seen = exec_sessions
    for args, wanted in ((["exec", "fix f"], True), (["exec", "--no-found-checks", "fix f"], False)):
        assert CliRunner().invoke(app, args).exit_code == 0
        assert seen.pop().agent.found_checks is wanted


def test_the_heal_budget_mutants_and_trace_reach_the_agents_healing_step(exec_sessions):
    from whiz.modes.healing import HealSettings

    seen = exec_sessions
    cases = ((["exec", "fix f"], HealSettings.budget_s), (["exec", "--heal-budget", "30", "fix f"], 30),
             (["exec", "--heal-budget", "0", "fix f"], None))  # fmt: skip
    for args, wanted in cases:
        assert CliRunner().invoke(app, args).exit_code == 0
        assert seen.pop().heal_budget_s == wanted
    result = CliRunner().invoke(app, ["exec", "--heal-budget", "-1", "fix f"])
    assert result.exit_code != 0 and "heal" in result.output.lower()
    for args, wanted in ((["exec", "fix f"], True), (["exec", "--no-mutants", "fix f"], False)):
        assert CliRunner().invoke(app, args).exit_code == 0
        assert seen.pop().mutants is wanted
    for args, wanted in ((["exec", "fix f"], True), (["exec", "--no-trace", "fix f"], False)):
        assert CliRunner().invoke(app, args).exit_code == 0
        assert seen.pop().trace is wanted
