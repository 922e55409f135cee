"""Approval requests as ACP `session/request_permission`: what whiz's approval mode leaves open
(a command in auto-edit, a file that looks like a secret in any mode; see `agent/approvals.py`) is
put to the person in the editor. "Always" for a command pre-approves that command line for the rest
of the session; a cancelled turn's pending request counts as no."""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from acp import RequestError
from acp.schema import AllowedOutcome, PermissionOption, ToolCallUpdate

from whiz.acp.runner import on_loop
from whiz.agent.approvals import ApprovalRequest, Approvals

log = logging.getLogger("whiz.acp")

KINDS = {"command": "execute", "edit": "edit", "secret": "read"}
"""The ACP tool kind each approval request is shown as."""

ALLOW_ONCE, ALLOW_ALWAYS, REJECT = "allow_once", "allow_always", "reject_once"


class AcpApprover:
    """An `Approver` that asks the ACP client. It runs on the agent's thread and waits for the
    answer, which arrives on the protocol's loop."""

    def __init__(self, conn: Any, session_id: str, loop: asyncio.AbstractEventLoop):
        self.conn = conn
        self.session_id = session_id
        self.loop = loop
        self.approvals: Approvals | None = None
        """The session's approvals, where "always" pre-approves a command (set once it is open)."""
        self._ids = itertools.count()

    def options(self, request: ApprovalRequest) -> list[PermissionOption]:
        options = [PermissionOption(option_id=ALLOW_ONCE, name="Allow", kind="allow_once")]
        if request.kind == "command":
            always = "Always allow this command"
            options.append(PermissionOption(option_id=ALLOW_ALWAYS, name=always, kind="allow_always"))
        options.append(PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"))
        return options

    async def approve(self, request: ApprovalRequest) -> bool:
        tool_call = ToolCallUpdate(
            tool_call_id=f"permission_{next(self._ids)}",
            title=request.summary,
            kind=KINDS.get(request.kind, "other"),
            status="pending",
            raw_input={"kind": request.kind, "detail": request.detail},
        )
        asked = self.conn.request_permission(
            session_id=self.session_id, tool_call=tool_call, options=self.options(request)
        )
        try:
            response = await asyncio.wrap_future(on_loop(self.loop, asked))
        except (RequestError, ConnectionError) as exc:
            log.warning("the permission request failed (%s); taken as no", exc)
            return False
        outcome = response.outcome
        if not isinstance(outcome, AllowedOutcome) or outcome.option_id not in (ALLOW_ONCE, ALLOW_ALWAYS):
            return False
        if outcome.option_id == ALLOW_ALWAYS and request.kind == "command" and self.approvals is not None:
            self.approvals.preapproved.add(request.detail.strip())
        return True
