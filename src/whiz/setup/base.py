"""What every client writer shares: the server it points at, where the user's files are, and what
a writer returns (the files, each as its whole new text, and how to start the client)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from whiz.errors import WhizError

MODEL_NAME = "whiz"
"""The model name the clients ask for: the server answers any name with its model."""
DEFAULT_WINDOW = 32768
"""The context window assumed where no server answered (the default model's trained length)."""
MAX_OUTPUT_TOKENS = 4096
"""The longest reply a client is told to ask for."""
TRIM_PROMPT = "You are a coding assistant. Be brief."
"""The one-line system prompt the trimmed client set-ups use (docs/clients.md)."""


class ConfigError(WhizError):
    """A client's configuration could not be set up (a file that does not parse, say); nothing was
    written."""

    status = 400
    code = "setup_failed"


@dataclass(frozen=True)
class Server:
    """The whiz server a client is pointed at."""

    root: str
    """`http://host:port`, without `/v1`."""
    context_window: int = DEFAULT_WINDOW
    api_key: str | None = None
    reachable: bool = False
    """Whether it answered when set up (else `context_window` is assumed)."""
    explicit: bool = False
    """Whether the user named the URL (`--base-url`) rather than taking the default."""

    @property
    def v1(self) -> str:
        return self.root + "/v1"

    @property
    def key(self) -> str:
        """The key a client sends: the server's, or a placeholder for a server without keys."""
        return self.api_key or "unused"


@dataclass(frozen=True)
class Where:
    """Where the user's files are: the home folder and the environment that moves them."""

    home: Path
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def here(cls) -> Where:
        return cls(Path.home(), dict(os.environ))

    def config_home(self) -> Path:
        """`$XDG_CONFIG_HOME`, else `~/.config`."""
        return Path(self.env.get("XDG_CONFIG_HOME") or self.home / ".config")


@dataclass
class Change:
    """One file a writer wants: its whole new text, and the settings it set (for the printout)."""

    path: Path
    text: str
    settings: list[str]
    existed: bool = False
    lost_comments: bool = False
    """The old file had comments, which a rewrite does not keep (the backup does)."""
    secret: bool = False
    """It holds the API key: written readable by the user alone."""


@dataclass
class Plan:
    """What setting a client up means: its files, the command that starts it, and notes."""

    client: str
    changes: list[Change]
    run: str
    notes: list[str] = field(default_factory=list)


class ClientWriter(Protocol):
    """Writes one client's configuration for a whiz server, merged into the user's own."""

    name: str

    def plan(self, server: Server, where: Where) -> Plan:
        """The files to write (nothing is written here); `ConfigError` when an existing one cannot
        be read."""
        ...
