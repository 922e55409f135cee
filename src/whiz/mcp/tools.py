"""The configured MCP servers' tools, offered to the agent (`whiz.agent.external.ExternalTools`).

`McpTools.start()` starts every server in the background when a session opens, so a slow one
starts while the user types and the model connects. The first request waits for those still
starting, each up to its `startup_timeout_sec` from when it began, and goes without any that did
not start (the user is told which, and why). A tool is offered as `SERVER__tool`, its arguments
checked against its input schema before the call. What a call returns comes back as text: text
content as it is, anything else (images, audio, binary resources) named and sized.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
from mcp.shared.exceptions import MCPError
from mcp.types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from whiz.agent.external import ExternalTool, ToolResult
from whiz.mcp.config import McpServerConfig
from whiz.mcp.connection import McpConnection

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpTools:
    """The servers of one agent session: start them, offer their tools, call them, close them."""

    def __init__(
        self,
        servers: list[McpServerConfig],
        *,
        cwd: Path,
        log_dir: Path,
        notice: Callable[[str], None] = lambda line: None,
    ):
        self.connections = [McpConnection(s, cwd=cwd, log_dir=log_dir) for s in servers]
        self.notice = notice
        self._offered: list[ExternalTool] | None = None
        self._where: dict[str, tuple[McpConnection, str]] = {}
        self._started_s = 0.0

    def start(self) -> McpTools:
        """Start every server in the background; returns self."""
        self._started_s = time.monotonic()
        for conn in self.connections:
            conn.start()
        return self

    async def tools(self) -> list[ExternalTool]:
        """The tools of the servers that started, waiting the first time for those still starting.
        The list is the same for the whole session (the model's cached prefix stays valid)."""
        if self._offered is None:
            waits = [self._wait(conn) for conn in self.connections]
            await asyncio.gather(*waits)
            started = [conn for conn in self.connections if conn.error is None]
            self._offered = [tool for conn in started for tool in self._tools_of(conn)]
        return self._offered

    async def _wait(self, conn: McpConnection) -> None:
        left_s = conn.config.startup_timeout_sec - (time.monotonic() - self._started_s)
        if await conn.wait_ready(left_s):
            count = len(self._tools_of(conn))
            self.notice(f"MCP server {conn.name}: {count} tool{'s' * (count != 1)}")
        else:
            self.notice(f"MCP server {conn.name} ({conn.config.describe()}) is not available: {conn.error}")

    def _tools_of(self, conn: McpConnection) -> list[ExternalTool]:
        enabled, disabled = conn.config.enabled_tools, set(conn.config.disabled_tools)
        offered = []
        for tool in conn.tools:
            if (enabled is not None and tool.name not in enabled) or tool.name in disabled:
                continue
            name = _UNSAFE.sub("_", f"{conn.name}__{tool.name}")[:64]
            self._where[name] = (conn, tool.name)
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            read_only = bool(tool.annotations and tool.annotations.read_only_hint)
            about = tool.description or (tool.annotations.title if tool.annotations else None) or ""
            offered.append(
                ExternalTool(name, about, {"type": "object", **schema}, read_only, f"MCP server {conn.name}")
            )
        return offered

    def invalid(self, tool: ExternalTool, arguments: dict[str, Any]) -> str | None:
        """The first way the arguments break the tool's input schema, said plainly."""
        try:
            validator = jsonschema.validators.validator_for(tool.parameters)(tool.parameters)
            error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        except jsonschema.exceptions.SchemaError:
            return None  # the server's schema is broken: let the server judge the call
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"the argument {where} is wrong: {error.message}" if where else error.message

    async def call(self, tool: ExternalTool, arguments: dict[str, Any]) -> ToolResult:
        conn, name = self._where[tool.name]
        if conn.error is not None:
            why = f"The MCP server {conn.name} is not running ({conn.error})"
            return ToolResult(f"{why}; do not call its tools.", False)
        try:
            result = await conn.call(name, arguments)
        except TimeoutError:
            timeout_s = conn.config.tool_timeout_sec
            return ToolResult(f"{tool.name} did not answer within {timeout_s:g} s; it was given up.", False)
        except MCPError as exc:
            if "closed" in exc.error.message.lower():
                conn.stopped("it stopped during a call")
                self.notice(f"MCP server {conn.name} stopped during a call of {name} (see {conn.log_path})")
                why = f"The MCP server {conn.name} stopped during the call"
                return ToolResult(f"{why}; its tools cannot be used now.", False)
            return ToolResult(f"{tool.name} failed: {exc.error.message}", False)
        except (ConnectionError, OSError) as exc:
            conn.stopped(str(exc) or "the connection failed")
            return ToolResult(f"The MCP server {conn.name} cannot be reached: {conn.error}.", False)
        return ToolResult(result_text(result), not result.is_error)

    async def close(self) -> None:
        """Stop every server (each within a bound)."""
        await asyncio.gather(*(conn.close() for conn in self.connections), return_exceptions=True)


def result_text(result: CallToolResult) -> str:
    """A call's result as the model reads it: text content as it is, other content summarized,
    structured content as JSON when there is nothing else."""
    parts = [_content_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    text = "\n".join(parts) if parts else "(no output)"
    return f"The tool reported an error: {text}" if result.is_error else text


def _content_text(block: Any) -> str:
    match block:
        case TextContent():
            return block.text
        case ImageContent() | AudioContent():
            kind = "image" if isinstance(block, ImageContent) else "audio"
            return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]"
        case ResourceLink():
            return f"[resource {block.uri}{f' ({block.name})' if block.name else ''}]"
        case EmbeddedResource():
            res = block.resource
            if isinstance(res, TextResourceContents):
                return f"[resource {res.uri}]\n{res.text}"
            return f"[resource {res.uri} ({res.mime_type or 'binary'}), not shown]"
    return f"[{getattr(block, 'type', 'content')}, not shown]"
