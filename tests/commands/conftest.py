"""The agent's fixtures serve these tests too."""

from tests.agent.conftest import project  # noqa: F401
