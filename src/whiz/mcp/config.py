"""Which MCP servers to start: `[mcp_servers.NAME]` tables of the config file, spelled as the Codex
CLI spells them, and `--mcp NAME=CMD` for one run.

    [mcp_servers.files]
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
    env = { LOG_LEVEL = "warn" }

    [mcp_servers.docs]
    url = "https://example.com/mcp"
    http_headers = { "X-Team" = "tools" }
    bearer_token_env_var = "DOCS_TOKEN"

The file is `$WHIZ_CONFIG`, else `config.toml` in the user config folder (`~/.config/whiz` on
Linux); it may hold `whiz serve`'s `[serve]` table too. A mistake in it (an unknown key, a server
with neither `command` nor `url`) is an `McpConfigError` naming the file, the server and the key.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from whiz.config_file import ConfigFile, ConfigFileError
from whiz.errors import InvalidRequest, did_you_mean

NAME = re.compile(r"^[A-Za-z0-9_-]+$")
"""A server's name: it prefixes its tools' names (`NAME__tool`), which function names must allow."""


class McpConfigError(InvalidRequest):
    """The MCP servers' configuration is wrong: the message says where and how."""


class McpServerConfig(BaseModel):
    """One MCP server: a command to start (stdio) or a URL to reach (streamable HTTP)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(description="The table's name; its tools are offered as NAME__tool.")
    command: str | None = Field(None, description="Program that runs the server over stdin/stdout.")
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables set for it.")
    env_vars: list[str] = Field(
        default_factory=list, description="Variables of whiz's environment passed on to it (it gets few)."
    )
    cwd: str | None = Field(None, description="Its working folder (default: the workspace).")
    url: str | None = Field(None, description="Streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp.")
    http_headers: dict[str, str] = Field(
        default_factory=dict, alias="headers", description="HTTP headers sent with every request."
    )
    env_http_headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers whose values come from these environment variables."
    )
    bearer_token_env_var: str | None = Field(
        None, description="Environment variable holding a bearer token (Authorization header)."
    )
    startup_timeout_sec: float = Field(10.0, gt=0, description="Seconds it may take to start and list tools.")
    tool_timeout_sec: float = Field(60.0, gt=0, description="How long one tool call may take.")
    enabled: bool = Field(True, description="false: configured but not started.")
    enabled_tools: list[str] | None = Field(None, description="Offer only these of its tools.")
    disabled_tools: list[str] = Field(default_factory=list, description="Never offer these tools.")

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("needs `command` (a program to start) or `url` (an HTTP endpoint), one of them")
        return self

    def environment(self) -> dict[str, str]:
        """What a stdio server gets beside the SDK's safe few (`PATH`, `HOME`, ...): the named
        variables of this environment, then `env`."""
        passed = {var: os.environ[var] for var in self.env_vars if var in os.environ}
        return {**passed, **self.env}

    def headers(self) -> dict[str, str]:
        """The HTTP headers to send: the literal ones, those from the environment, the bearer token."""
        headers = dict(self.http_headers)
        for header, var in self.env_http_headers.items():
            if value := os.environ.get(var):
                headers[header] = value
        if self.bearer_token_env_var:
            token = os.environ.get(self.bearer_token_env_var)
            if not token:
                raise McpConfigError(
                    f"MCP server '{self.name}': the environment variable {self.bearer_token_env_var} "
                    "(bearer_token_env_var) is not set."
                )
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def describe(self) -> str:
        """How it is reached, in a few words: its command line or its URL."""
        if self.url is not None:
            return self.url
        return shlex.join([self.command or "", *self.args])


KEYS = sorted(({f.alias or n for n, f in McpServerConfig.model_fields.items()} | {"http_headers"}) - {"name"})


def server(name: str, table: Any, where: str) -> McpServerConfig:
    """One `[mcp_servers.NAME]` table as a server; McpConfigError saying what is wrong with it."""
    if not NAME.match(name):
        raise McpConfigError(f"{where}: the MCP server name {name!r} may hold only letters, digits, - and _.")
    if not isinstance(table, dict):
        raise McpConfigError(f"{where}: [mcp_servers.{name}] must be a table.")
    for key in table:
        if key not in KEYS:
            hint = did_you_mean(key, KEYS, or_list=True)
            raise McpConfigError(f"{where}: unknown key '{key}' in [mcp_servers.{name}]{hint}.", param=key)
    try:
        return McpServerConfig(name=name, **table)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        at = f" {key}:" if key else ""
        raise McpConfigError(f"{where}: [mcp_servers.{name}]{at} {message}.", param=key or name) from None


def tables_in(file: ConfigFile) -> dict[str, Any]:
    """The `[mcp_servers]` tables of a config file."""
    tables = file.table("mcp_servers")
    if not isinstance(tables, dict):
        raise McpConfigError(f"{file.path}: mcp_servers must be a table of servers ([mcp_servers.NAME]).")
    return tables


def server_flag(flag: str) -> McpServerConfig:
    """`--mcp NAME=CMD`: CMD split as a shell would (a URL starting http:// or https:// is reached
    over streamable HTTP instead)."""
    name, eq, command = flag.partition("=")
    name, command = name.strip(), command.strip()
    if not eq or not name or not command:
        raise McpConfigError(f"--mcp takes NAME=COMMAND (e.g. files='npx -y server .'), not {flag!r}.")
    if command.startswith(("http://", "https://")):
        return server(name, {"url": command}, "--mcp")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise McpConfigError(f"--mcp {name}: cannot split {command!r} into words: {exc}.") from None
    return server(name, {"command": words[0], "args": words[1:]}, "--mcp")


def mcp_servers(
    flags: list[str] | None = None, path: Path | None = None, *, file: ConfigFile | None = None
) -> tuple[list[McpServerConfig], list[str]]:
    """The servers to start for a run: the config file's (`file`, else the one at `path`, else
    `config_path()`'s), then `--mcp` ones (which replace a file's server of the same name),
    disabled ones left out; and what is wrong in the file, a line each (that server is left out;
    the run goes on). A bad `--mcp` raises McpConfigError."""
    found: dict[str, McpServerConfig] = {}
    problems = []
    try:
        file = file or ConfigFile.read(path)
        tables = tables_in(file)
    except (McpConfigError, ConfigFileError) as exc:
        tables, problems = {}, [exc.message]
    for name, table in tables.items():
        try:
            found[name] = server(name, table, str(file.path if file else path))
        except McpConfigError as exc:
            problems.append(exc.message.rstrip("."))
    for flag in flags or ():
        configured = server_flag(flag)
        found[configured.name] = configured
    return [s for s in found.values() if s.enabled], problems
