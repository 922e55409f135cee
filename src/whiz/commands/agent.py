"""What the agent commands do with their options before the agent starts: the session's options
(`SessionOptions`), the MCP servers, the task; each bad input ends the command with one line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from whiz.commands.flags import fail

if TYPE_CHECKING:
    from whiz.agent.config import AgentConfig
    from whiz.commands.agent_options import AcpOptions, CodeOptions, ExecOptions, HealOptions, SwarmOptions
    from whiz.config_file import ConfigFile
    from whiz.mcp.config import McpServerConfig
    from whiz.modes.session import SessionOptions


def session_options(
    options: ExecOptions | HealOptions | SwarmOptions | CodeOptions | AcpOptions,
    agent: AgentConfig | None = None,
    *,
    resume: str | None = None,
    heal: int | None = None,
    mcp: list[str] | None = None,
) -> SessionOptions:
    """The options as `SessionOptions` for the current directory, with the agent's settings
    (`AgentConfig`) where the command has them, and the MCP servers of the config file and
    `--mcp` where it offers them (`mcp`, None where it does not). The config file is read once."""
    from whiz.agent.project.secret_files import SecretFiles
    from whiz.commands.agent_options import ActingOptions
    from whiz.modes.registry import Mode
    from whiz.modes.session import SessionOptions

    file = config_file()
    try:
        run = SessionOptions(
            Path.cwd(),
            mode=None if options.mode is None else Mode(options.mode),
            fast=options.fast(),
            deep=options.deep(),
            policy=options.policy,  # type: ignore[arg-type]
            policy_model_check=options.policy_model_check,
            resume=resume,
            heal=heal,
        )
        if agent is not None:
            run.agent = agent
        run.agent.secrets = SecretFiles(tuple(options.secret_file))
        run.agent.sandbox = options.confinement(options.sandbox, file)
    except ValueError as exc:  # the config file's [sandbox] table
        raise fail(str(exc)) from None
    if mcp is not None:
        run.mcp = mcp_config(mcp, file)
    if isinstance(options, ActingOptions):
        run.heal_budget_s, run.mutants = options.heal_budget or None, options.mutants
        run.trace = options.trace
    return run


def config_file() -> ConfigFile:
    """The user's config file, parsed; one that cannot be read or parsed ends the command."""
    from whiz.config_file import ConfigFile, ConfigFileError

    try:
        return ConfigFile.read()
    except ConfigFileError as exc:
        raise fail(exc.message) from None


def mcp_config(flags: list[str], file: ConfigFile) -> list[McpServerConfig]:
    """The MCP servers for an agent run (the config file's and `--mcp`'s). A bad `--mcp` exits with
    one line; a mistake in the config file is said, and that server left out, and the run goes on."""
    import importlib.util

    from whiz.mcp.config import McpConfigError, mcp_servers

    try:
        servers, problems = mcp_servers(flags, file=file)
    except McpConfigError as exc:
        raise fail(exc.message) from None
    for problem in problems:
        typer.echo(f"whiz: {problem}; that MCP server is not started.", err=True)
    if servers and importlib.util.find_spec("mcp") is None:
        raise fail("MCP servers are configured but the MCP SDK is not installed: pip install 'whiz[mcp]'")
    return servers


def read_task(task: str) -> str:
    """The task argument, from stdin for `-`; an empty one exits with one line."""
    if task == "-":
        task = sys.stdin.read()
    if not task.strip():
        raise fail("the task is empty")
    return task
