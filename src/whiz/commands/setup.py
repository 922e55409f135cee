"""`whiz setup CLIENT`: write a client's configuration for this whiz server (or show it, `--print`),
then warm the client's fixed opening into the server's prefix cache in the background."""

from __future__ import annotations

import sys
from typing import Annotated, TextIO

from pydantic import BaseModel, ConfigDict, Field

from whiz.flag import Flag
from whiz.setup import writer_for
from whiz.setup.apply import describe, write_plan
from whiz.setup.base import ConfigError, Where
from whiz.setup.server import DEFAULT_ROOT, find_server

EXIT_OK, EXIT_ERROR = 0, 2


class SetupOptions(BaseModel):
    """`whiz setup`'s options (its flags, made by `settings_options.settings_command`)."""

    model_config = ConfigDict(title="", defer_build=True)

    print_: Annotated[bool, Flag("--print")] = Field(
        False, description="Show the files it would write, and write nothing."
    )
    base_url: Annotated[str | None, Flag(shown=f"$WHIZ_BASE_URL, else {DEFAULT_ROOT}")] = Field(
        None, description="The whiz server the client talks to."
    )
    api_key: Annotated[str | None, Flag(env="WHIZ_API_KEY")] = Field(
        None, description="Bearer key for the server."
    )
    warm: bool = Field(
        True,
        description="Warm the client's fixed opening (its prompt and tools) into the server's prefix "
        "cache in the background, so its first turn starts warm.",
    )


def run_setup(
    client: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    print_only: bool = False,
    warm: bool = True,
    where: Where | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Set `client` up (or only show how, `print_only`); returns the exit code."""
    out, err = out or sys.stdout, err or sys.stderr
    where = where or Where.here()
    try:
        writer = writer_for(client)
        server = find_server(base_url, api_key, dict(where.env))
        plan = writer.plan(server, where)
        written = None if print_only else write_plan(plan)
    except (ValueError, ConfigError) as exc:
        err.write(f"error: {getattr(exc, 'message', exc)}\n")
        return EXIT_ERROR
    if print_only:
        for change in plan.changes:
            out.write(f"# {change.path}\n{change.text}\n")
    if server.reachable:
        said = f"the whiz server at {server.root}: a {server.context_window}-token context window"
    else:
        said = (
            f"no whiz server answered at {server.root}: a {server.context_window}-token window is "
            "assumed (run this again with `whiz serve` up to write the real one)"
        )
    for line in [said, *describe(plan, written)]:
        err.write(f"whiz: {line}\n")
    if warm and written is not None and server.reachable:
        from whiz.setup.warm import start_warming

        err.write(f"whiz: {start_warming(plan.client, server, where)}\n")
    return EXIT_OK
