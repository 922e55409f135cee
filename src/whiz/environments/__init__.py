"""Where the agent's commands run. `Environment` is the seam; `LocalEnvironment` the default adapter."""

from whiz.environments.local import CommandResult, Environment, LocalEnvironment, truncate

__all__ = ["CommandResult", "Environment", "LocalEnvironment", "truncate"]
