"""MCP servers the editor hands a session (`mcpServers` of `session/new` and `session/load`), as
whiz's own `McpServerConfig`s: over stdio (a command) or streamable HTTP (a URL), the two kinds
the initialize answer advertises. An SSE server or one the client reaches over ACP itself is
refused with a message that says so, rather than left out in silence."""

from __future__ import annotations

import re
from typing import Any

from acp.schema import HttpMcpServer, McpServerStdio

from whiz.mcp import McpServerConfig

NOT_A_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def tool_prefix(name: str) -> str:
    """An editor's display name (`My Notes`) as the prefix of its tools' names (`My_Notes`):
    function names allow letters, digits, `-` and `_` only."""
    return NOT_A_NAME.sub("_", name).strip("_") or "mcp"


def editor_servers(servers: list[Any] | None) -> list[McpServerConfig]:
    """The editor's servers as whiz's; ValueError naming a server whiz cannot reach."""
    made: dict[str, McpServerConfig] = {}
    for entry in servers or []:
        name = tool_prefix(entry.name)
        if isinstance(entry, McpServerStdio):
            env = {var.name: var.value for var in entry.env or []}
            args = list(entry.args or [])
            made[name] = McpServerConfig(name=name, command=entry.command, args=args, env=env)
        elif isinstance(entry, HttpMcpServer):
            headers = {h.name: h.value for h in entry.headers or []}
            made[name] = McpServerConfig(name=name, url=entry.url, headers=headers)
        else:
            kind = getattr(entry, "type", type(entry).__name__)
            raise ValueError(
                f"the MCP server {entry.name!r} is reached over {kind}; whiz connects to MCP servers "
                "over stdio (a command) or streamable HTTP (type http)"
            )
    return list(made.values())


def merged(configured: list[McpServerConfig], editor: list[McpServerConfig]) -> list[McpServerConfig]:
    """The user's configured servers and the editor's; where both name one, the editor's (it is
    the session's own, and the same tool names twice would shadow each other)."""
    mine = {server.name for server in editor}
    return [server for server in configured if server.name not in mine] + editor
