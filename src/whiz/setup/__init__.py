"""`whiz setup CLIENT`: one command writes a client's configuration for a whiz server.

Each client has a writer module (`claude.py`, `codex.py`, ...) that says what its files should hold
(`ClientWriter.plan`), merged into what the user has; `apply.py` backs the old files up and writes
the new ones, or only shows them (`--print`). `warm.py` then warms the client's fixed opening (its
system prompt and tools) into the server's prefix cache in the background.
"""

from __future__ import annotations

import importlib

from whiz.setup.base import ClientWriter

CLIENTS = {
    "claude": "whiz.setup.claude:ClaudeCode",
    "codex": "whiz.setup.codex:CodexCli",
    "opencode": "whiz.setup.opencode:OpenCode",
    "qwen": "whiz.setup.qwen:QwenCode",
    "aider": "whiz.setup.aider:Aider",
    "zed": "whiz.setup.zed:Zed",
}
"""The clients `whiz setup` knows, each its writer (imported when named)."""


def writer_for(name: str) -> ClientWriter:
    """The writer for client `name`; ValueError naming the clients for another name."""
    target = CLIENTS.get(name.lower())
    if target is None:
        raise ValueError(f"no client {name!r}; whiz setup knows {', '.join(CLIENTS)}")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)()
