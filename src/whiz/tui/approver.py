"""Approval prompts in the UI: the agent's question waits until the user presses y or n."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from whiz.agent.approvals import ApprovalRequest


class PromptApprover:
    """An `Approver` that shows the request in the live area and waits for the user's answer.

    If the turn is stopped while it waits, the wait is cancelled with it and nothing runs.
    """

    def __init__(self, on_change: Callable[[], None] = lambda: None):
        self.on_change = on_change
        self.pending: ApprovalRequest | None = None
        self._answer: asyncio.Future[bool] | None = None

    async def approve(self, request: ApprovalRequest) -> bool:
        self._answer = asyncio.get_running_loop().create_future()
        self.pending = request
        self.on_change()
        try:
            return await self._answer
        finally:
            self.pending, self._answer = None, None
            self.on_change()

    def answer(self, allowed: bool) -> None:
        """The user's answer to the pending request (ignored when nothing is pending)."""
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(allowed)
