"""The loop's control flow: exceptions that carry a message, caught in one place (`Agent._turn`).

`Submitted` ends the turn done, `Failed` ends it with a reason, `Cancelled` when the user stopped
it, and `FormatError` (a malformed action, or a reply that owed an edit and made none) sends
feedback and lets the model try again, `AgentConfig.max_retries` times in a row at most.
"""

from __future__ import annotations


class AgentSignal(Exception):
    """Control flow of the loop; the message is for the user (or, for FormatError, the log)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Submitted(AgentSignal):
    """The task is done; the message sums it up."""


class Failed(AgentSignal):
    """The task cannot be done (or not within the limits); the message says why."""


class OverBudget(Failed):
    """The turn used up its output tokens, its time or its failing test runs (`AgentConfig.max_turn_*`,
    `max_test_failures`); the message says which."""


class Cancelled(AgentSignal):
    """The user stopped the turn."""


class FormatError(AgentSignal):
    """The model's actions were malformed; the feedback is already in the conversation."""
