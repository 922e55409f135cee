"""MCP tools for the agent: servers the user configured (`[mcp_servers.NAME]` in the config file,
`--mcp NAME=CMD` per run), reached through the `mcp` SDK over stdio or streamable HTTP.

`config.py` reads what to start, `connection.py` keeps one server's session, `tools.py` offers the
servers' tools to the agent (`whiz.agent.external.ExternalTools`). The model server never imports
this package: it is the agent's, started and stopped with an agent session.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from whiz.mcp.config import McpConfigError, McpServerConfig

if TYPE_CHECKING:
    from whiz.mcp.tools import McpTools


def start_mcp(
    servers: list[McpServerConfig], workspace: Path, log_dir: Path, notice: Callable[[str], None]
) -> McpTools | None:
    """Start `servers` in the background for one agent session (None: there are none). The SDK is
    imported only here, so whiz runs without it when no server is configured."""
    if not servers:
        return None
    try:
        from whiz.mcp.tools import McpTools
    except ImportError as exc:
        raise McpConfigError(
            f"MCP servers are configured ({', '.join(s.name for s in servers)}) but the MCP SDK is "
            f"not installed ({exc}): pip install 'whiz[mcp]'."
        ) from None
    return McpTools(servers, cwd=workspace, log_dir=log_dir, notice=notice).start()
