"""How a setting is spelled on the command line: read by `whiz.commands.settings_options`, which
makes a settings model's fields into a command's flags. Apart from the settings modules so that a
command's options can be made without the server's settings (`whiz.config`), which take a tenth of
a second to build on a busy 2-core machine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    """How a setting is spelled on the command line where `--<name>` is not the whole story
    (`Annotated[list[str], Flag("--api-key")]`): a list's flag names one item and is repeated,
    and `also` keeps an older spelling working. `env` is an environment variable the flag reads
    when it is not given, `metavar` what help calls its value, and `shown` what help says of a
    default of None (the default decided later: "fast, or the resumed session's")."""

    name: str | None = None
    also: tuple[str, ...] = ()
    env: str | None = None
    metavar: str | None = None
    shown: str | None = None
