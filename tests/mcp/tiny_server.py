"""A small MCP server written with the SDK, for the tests: notes kept as files in `$NOTES_DIR`.

    python tiny_server.py stdio [DIR]     serve over stdin/stdout (notes in DIR, else $NOTES_DIR)
    python tiny_server.py http PORT       serve streamable HTTP on 127.0.0.1:PORT/mcp

`read_note` says it is read-only; `write_note` writes; `crash` ends the process mid-call (a server
that dies under the agent); `sleep` takes as long as it is told (a call that times out).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("notes")
ARGS = sys.argv[1:]
NOTES = Path(ARGS[1] if ARGS[:1] == ["stdio"] and len(ARGS) > 1 else os.environ.get("NOTES_DIR", "."))


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(name: str) -> str:
    """Show the note called `name`."""
    path = NOTES / f"{name}.txt"
    if not path.exists():
        raise ToolError(f"no note called {name}")
    return path.read_text()


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def write_note(name: str, text: str, repeat: int = 1) -> str:
    """Write `text` (`repeat` times) as the note called `name`."""
    (NOTES / f"{name}.txt").write_text(text * repeat)
    return f"wrote {name}"


@server.tool()
def crash() -> str:
    """End the server at once."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def sleep(seconds: float) -> str:
    """Wait `seconds`, then answer."""
    time.sleep(seconds)
    return "awake"


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
