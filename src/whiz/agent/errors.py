"""The agent's error family. Every message is written to be shown to the model, so it can retry."""

from __future__ import annotations

from whiz.errors import WhizError


class WhizAgentError(WhizError):
    """Base of every error the agent raises on purpose; `message` explains what to do next."""

    status = 400
    type = "invalid_request_error"
    code = "agent_error"
