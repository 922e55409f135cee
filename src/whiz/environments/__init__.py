"""Where the agent's commands run. `Environment` is the seam; `environment_for` picks the adapter:
`LocalEnvironment` unconfined, or the same runner confined by bubblewrap (`sandbox`)."""

from whiz.environments.errors import SandboxUnavailable
from whiz.environments.local import CommandResult, Environment, LocalEnvironment, truncate
from whiz.environments.sandbox import (
    SandboxMode,
    SandboxOptions,
    environment_for,
    run_confined,
    run_sandboxed,
)

__all__ = [
    "CommandResult",
    "Environment",
    "LocalEnvironment",
    "SandboxMode",
    "SandboxOptions",
    "SandboxUnavailable",
    "environment_for",
    "run_confined",
    "run_sandboxed",
    "truncate",
]
