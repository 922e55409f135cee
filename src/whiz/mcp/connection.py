"""One MCP server's session: started on a task of its own (the SDK's transports are context
managers that must be left on the task that entered them), ready once its tools are listed, and
closed by setting `stop`. Its stderr goes to a log file, not the user's terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import IO, Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, Tool

from whiz.mcp.config import McpServerConfig

CLOSE_S = 5.0
"""How long a server is given to end once asked (the SDK stops a stdio one within this too)."""


class McpConnection:
    """A started (or starting) server. `tools` is what it listed; `error` why it is not usable."""

    def __init__(self, config: McpServerConfig, *, cwd: Path, log_dir: Path):
        self.config = config
        self.cwd = cwd
        self.log_path = log_dir / f"mcp-{config.name}.log"
        self.log_dir = log_dir
        self.tools: list[Tool] = []
        self.error: str | None = None
        """Why the server cannot be used: it did not start, or it stopped."""
        self.ready = asyncio.Event()
        """Set once it has listed its tools, or failed to."""
        self._client: Client | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def start(self) -> None:
        """Start it in the background."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp-{self.name}")

    async def wait_ready(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for it to be ready; False (and `error` set) if it is not."""
        try:
            await asyncio.wait_for(self.ready.wait(), max(0.0, timeout_s))
        except TimeoutError:
            self.error = f"did not start within {self.config.startup_timeout_sec:g} s"
            self._stop.set()
            if self._task is not None:
                self._task.cancel()  # ended in the background; `close` waits for it
        return self.error is None

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call one of its tools; raises TimeoutError past its tool timeout, and the SDK's errors."""
        if self._client is None:
            raise ConnectionError(self.error or "the server is not running")
        return await asyncio.wait_for(self._client.call_tool(tool, arguments), self.config.tool_timeout_sec)

    def stopped(self, why: str) -> None:
        """Mark it unusable (it crashed, or closed the connection)."""
        self.error = self.error or why

    async def close(self) -> None:
        """Ask it to end and wait (bounded) until it has."""
        self._stop.set()
        if self._task is not None and not self._task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_S)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task

    async def _run(self) -> None:
        log: IO[str] | None = None
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self.config.url is not None:
                    http = create_mcp_http_client(headers=self.config.headers())
                    await stack.enter_async_context(http)
                    transport: Any = streamable_http_client(self.config.url, http_client=http)
                else:
                    self.log_dir.mkdir(parents=True, exist_ok=True)
                    log = stack.enter_context(self.log_path.open("a", encoding="utf-8"))
                    params = StdioServerParameters(
                        command=self.config.command or "",
                        args=self.config.args,
                        env=self.config.environment() or None,
                        cwd=self.config.cwd or self.cwd,
                    )
                    transport = stdio_client(params, errlog=log)
                client = await stack.enter_async_context(Client(transport, cache=None))
                self.tools = await _all_tools(client)
                self._client = client
                self.ready.set()
                await self._stop.wait()
        except Exception as exc:  # noqa: BLE001 - any failure to start is reported, never raised
            self.error = self.error or _why(exc, self)
        finally:
            self._client = None
            self.error = self.error or ("stopped" if self._stop.is_set() else "the connection ended")
            self.ready.set()


async def _all_tools(client: Client) -> list[Tool]:
    tools, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def _why(exc: BaseException, conn: McpConnection) -> str:
    """A start's failure in a line: the program missing, the server refusing, an HTTP error."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"cannot run {conn.config.command!r}: no such program"
    text = str(exc).strip() or type(exc).__name__
    where = f" (its output: {conn.log_path})" if conn.config.url is None else ""
    return f"{text}{where}"
