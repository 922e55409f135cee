"""The user's config file, read and parsed once for a command: `$WHIZ_CONFIG`, else `config.toml`
in the user config folder (`~/.config/whiz` on Linux). Its tables belong to their readers, which
this hands them to: `[serve]` to `whiz.config`, `[mcp_servers]` to `whiz.mcp.config`, `[sandbox]`
to `whiz.environments.home`; each says what is wrong inside its own table."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whiz.errors import InvalidRequest


class ConfigFileError(InvalidRequest):
    """The config file cannot be read or is not TOML: the message names the file and why."""


def config_path() -> Path:
    """The config file: `$WHIZ_CONFIG`, else config.toml in the user config folder."""
    import platformdirs

    env = os.environ.get("WHIZ_CONFIG")
    return Path(env).expanduser() if env else Path(platformdirs.user_config_dir("whiz")) / "config.toml"


@dataclass(frozen=True)
class ConfigFile:
    """A config file's tables, as parsed once (none when the file is not there)."""

    path: Path
    tables: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path | None = None, *, required: bool = False) -> ConfigFile:
        """The file at `path` (default: `config_path()`); a missing one has no tables, unless it is
        `required` (a file named on the command line). ConfigFileError when it cannot be read."""
        path = path or config_path()
        try:
            with open(path, "rb") as f:
                return cls(path, tomllib.load(f))
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and not required:
                return cls(path)
            raise ConfigFileError(
                f"Cannot read the config file {path}: {exc.strerror}.", param="config"
            ) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigFileError(
                f"The config file {path} is not valid TOML: {exc}.", param="config"
            ) from None

    def table(self, name: str) -> Any:
        """The table `name` as the file wrote it (its reader checks its shape); {} when absent."""
        return self.tables.get(name, {})
