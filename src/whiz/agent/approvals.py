"""What the agent may do without asking: the approval modes, and the `Approver` seam that asks.

    read-only   nothing is written and no command runs; the model is told so
    auto-edit   edits inside the workspace are applied; each command is put to the approver (default)
    full-auto   commands run without asking too (still in the workspace, with a timeout)

The checks found in the user's code run where no test command is given, except in read-only
(`Approvals.found_checks`).

An MCP tool's call is a command's equal, except that one its server marks read-only runs in every
mode.

Whatever the mode, showing the model a file that looks like a secret (`secret_files.py`) is put
to the approver.

The interactive UI's approver asks the user; `whiz exec` has no one to ask, so its approver
declines (`PolicyApprover`); tests script the answers (`ScriptedApprover`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Protocol


class ApprovalMode(StrEnum):
    READ_ONLY = "read-only"
    AUTO_EDIT = "auto-edit"
    FULL_AUTO = "full-auto"


@dataclass(frozen=True)
class ApprovalRequest:
    """One thing the agent wants to do. `detail` is the command line or the diff."""

    kind: Literal["command", "edit", "secret", "tool"]
    summary: str
    detail: str


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""
    """Why not, in words the model can act on."""


class Approver(Protocol):
    """Answers an approval request: True to go ahead."""

    async def approve(self, request: ApprovalRequest) -> bool: ...


class PolicyApprover:
    """The headless answer: no one to ask, so every request is declined (or, if `allow`, granted;
    never a secret's, which only a person can let out)."""

    def __init__(self, allow: bool = False):
        self.allow = allow

    async def approve(self, request: ApprovalRequest) -> bool:
        return self.allow and request.kind != "secret"


@dataclass
class ScriptedApprover:
    """Answers from a list, in order, and records what it was asked (for tests)."""

    answers: list[bool]
    asked: list[ApprovalRequest] = field(default_factory=list)

    async def approve(self, request: ApprovalRequest) -> bool:
        self.asked.append(request)
        return self.answers.pop(0) if self.answers else False


class Approvals:
    """The mode, the approver for what the mode leaves open, and commands the user pre-approved."""

    def __init__(
        self,
        mode: ApprovalMode | str = ApprovalMode.AUTO_EDIT,
        approver: Approver | None = None,
        preapproved: Iterable[str] = (),
    ):
        self.mode = ApprovalMode(mode)
        self.approver: Approver = approver or PolicyApprover()
        self.preapproved = {c.strip() for c in preapproved if c and c.strip()}

    async def edit(self, summary: str, diff: str) -> Decision:
        if self.mode is ApprovalMode.READ_ONLY:
            return Decision(False, "the session is read-only: files cannot be changed. Answer in words.")
        return Decision(True)

    def found_checks(self) -> Decision:
        """Whether the checks found in the user's code (`project/found_checks.py`) may run where no
        test command is given: in auto-edit and full-auto, not in read-only. They are the user's
        own checks, run by whiz rather than a command the model wrote, confined as the test
        command is (the sandbox, a timeout), on the code the edit being judged has changed."""
        if self.mode is ApprovalMode.READ_ONLY:
            return Decision(False, "the session is read-only, so the checks found in the code were not run")
        return Decision(True)

    async def command(self, command: str) -> Decision:
        if self.mode is ApprovalMode.READ_ONLY:
            return Decision(False, "the session is read-only: commands cannot run. Answer in words.")
        if self.mode is ApprovalMode.FULL_AUTO or command.strip() in self.preapproved:
            return Decision(True)
        request = ApprovalRequest("command", f"run `{command}`", command)
        if await self.approver.approve(request):
            return Decision(True)
        return Decision(False, "the user did not approve running this command. Do not retry it.")

    async def tool(self, name: str, arguments: str, *, read_only: bool) -> Decision:
        """An MCP tool's call: one whose server says it only reads (`readOnlyHint`) runs in every
        mode, as a READ does; any other is a command's equal: refused in read-only, run in
        full-auto, put to the approver otherwise."""
        if read_only or self.mode is ApprovalMode.FULL_AUTO:
            return Decision(True)
        if self.mode is ApprovalMode.READ_ONLY:
            why = f"the session is read-only and {name} is not marked read-only by its server"
            return Decision(False, f"{why}. Answer in words.")
        brief = arguments if len(arguments) <= 120 else arguments[:120] + "…"
        request = ApprovalRequest("tool", f"call the MCP tool {name} {brief}", f"{name} {arguments}")
        if await self.approver.approve(request):
            return Decision(True)
        return Decision(False, f"the user did not approve calling {name}. Do not retry it.")

    async def secret(self, path: str, action: str = "read") -> Decision:
        """Whether the model may see `path`, a file that looks like a secret, to `action` it: asked
        in every mode (full-auto and read-only too), since its values would leave the machine
        with the next request and stay in the session's record."""
        request = ApprovalRequest(
            "secret",
            f"{action} {path}, which looks like a secret (no: it sees the keys, values masked)",
            f"{path}: its contents go to the model and into the session's record",
        )
        if await self.approver.approve(request):
            return Decision(True)
        return Decision(False, f"the user did not let the model see {path}, which looks like a secret")
