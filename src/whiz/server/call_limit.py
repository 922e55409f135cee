"""`max_tool_calls`: a response carries at most that many tool calls.

The specification bounds the calls the model "may make while generating the response"; OpenAI's
reference says further attempts are ignored. So whiz keeps the first `most` calls and drops the
rest as if never made: they are not streamed, not in the response's output, and not in the
conversation a continuation goes on from (an output for one is an output for no call). The
response completes as it would have, and says how many calls went (`dropped_tool_calls` in its
`whiz` object).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from whiz.backend.types import TurnResult
from whiz.chat.messages import Message, ToolCall


@dataclass
class CallLimit:
    """One response's tool calls against its `max_tool_calls` (None: no limit)."""

    most: int | None
    kept: list[ToolCall] = field(default_factory=list)
    dropped: int = 0

    def admits(self, call: ToolCall) -> bool:
        """Whether `call` is one the response carries; counts it either way."""
        if self.most is not None and len(self.kept) >= self.most:
            self.dropped += 1
            return False
        self.kept.append(call)
        return True

    def message(self, result: TurnResult) -> Message:
        """The reply as the conversation keeps it: with the calls the response carries only."""
        message = result.message()
        if not self.dropped:
            return message
        return Message("assistant", message.content, tuple(self.kept))

    def state(self, result: TurnResult) -> object:
        """The backend's record to resume from: none once calls were dropped (it holds their
        tokens, which the conversation no longer does), so a continuation is rendered afresh."""
        return None if self.dropped else result.state
