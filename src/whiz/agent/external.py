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
    """The instructions' paragraph for text actions: how to call a tool, and each one with its
    arguments."""
    lines = [
        "More tools, from MCP servers the user added. To call one, write on its own line:",
        'CALL name {"argument": "value"}',
        "with its arguments as one line of JSON. The tools:",
    ]
    for tool in tools:
        props = tool.parameters.get("properties") or {}
        required = set(tool.parameters.get("required") or [])
        args = ", ".join(
            f"{k}{'' if k in required else '?'}: {_type(v)}" for k, v in props.items() if isinstance(v, dict)
        )
        about = " ".join(tool.description.split())[:200]
        lines.append(f"- {tool.name} {{{args}}}: {about}" if about else f"- {tool.name} {{{args}}}")
    return "\n".join(lines)


def _type(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(map(str, kind))
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"{_type(schema['items'])}[]"
    return str(kind or "any")


def shown(arguments: dict[str, Any]) -> str:
    """A call's arguments as the user is asked about them (one line, cut)."""
    text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= 500 else text[:500] + "…"
