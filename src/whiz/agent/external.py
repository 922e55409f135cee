"""Tools from outside the agent: those of the MCP servers the user configured (`whiz.mcp`).

The agent knows them only through `ExternalTools`: what they are (a name, a description, an
argument schema, whether the tool says it only reads), a check of a call's arguments against the
schema, and the call. Asking first is the agent's part (`Approvals.tool`), as for a command. How
they are offered to the model: as more function tools (`--actions tools`), or in text as
`CALL name {"arg": ...}` lines, listed in the instructions (`listing`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ExternalTool:
    """One tool as the model is offered it."""

    name: str
    """As the model calls it: the server's name, two underscores, the tool's (`files__read_file`)."""
    description: str
    parameters: dict[str, Any]
    """The JSON schema of its arguments (an object)."""
    read_only: bool = False
    """The server says the tool changes nothing (MCP's `readOnlyHint`)."""
    source: str = ""
    """Where it comes from, for people: "MCP server files"."""


@dataclass
class ToolResult:
    """What a call came to: the text the model reads back, and whether it worked."""

    text: str
    ok: bool = True


class ExternalTools(Protocol):
    """The tools of the configured servers, and calling them."""

    async def tools(self) -> list[ExternalTool]:
        """The tools on offer (waiting, within a bound, for servers still starting)."""
        ...

    def invalid(self, tool: ExternalTool, arguments: dict[str, Any]) -> str | None:
        """What is wrong with the arguments for `tool`, in words for the model; None: they fit."""
        ...

    async def call(self, tool: ExternalTool, arguments: dict[str, Any]) -> ToolResult:
        """Call it; failures (a crashed server, a timeout, the tool's error) come back as results."""
        ...

    async def close(self) -> None:
        """Stop the servers (the session is over)."""
        ...


def specs(tools: list[ExternalTool]) -> list[dict[str, Any]]:
    """The tools as Responses function tools, beside the agent's own."""
    return [
        {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
        for t in tools
    ]


def listing(tools: list[ExternalTool]) -> str:
    """The instructions' paragraph for text actions: each tool's CALL line to copy, its required
    arguments with a placeholder of their type (a small model copies an abstract example such
    as `{"argument": "value"}` as it is), then what it does."""
    lines = [
        "More tools, from MCP servers the user added. To use one, write its CALL line on a line of",
        "its own, with your values in place of the ... (the arguments are one line of JSON):",
    ]
    for tool in tools:
        props = tool.parameters.get("properties") or {}
        required = [k for k in tool.parameters.get("required") or [] if isinstance(props.get(k), dict)]
        optional = [k for k in props if k not in required]
        args = json.dumps({k: _placeholder(props[k]) for k in required}, ensure_ascii=False)
        about = " ".join(tool.description.split())[:200]
        more = f" (may also take: {', '.join(optional)})" if optional else ""
        lines.append(f"CALL {tool.name} {args}{more}" + (f"  -- {about}" if about else ""))
    return "\n".join(lines)


def _placeholder(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return {"integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}.get(str(kind), "...")


def plain_argument(tool: ExternalTool, text: str) -> dict[str, Any] | None:
    """`CALL tool some words` for a tool of one required string argument: the words as it (as
    `READ path` takes a path); None for any other tool."""
    props = tool.parameters.get("properties") or {}
    required = tool.parameters.get("required") or list(props)
    if len(required) != 1 or (props.get(required[0]) or {}).get("type", "string") != "string":
        return None
    return {required[0]: text.strip().strip("\"'`")}


def shown(arguments: dict[str, Any]) -> str:
    """A call's arguments as the user is asked about them (one line, cut)."""
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= 500 else text[:500] + "…"
