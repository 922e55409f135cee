"""An agent session with modes, healing steps and the safety policy: what `whiz exec` and the
interactive UI drive.

`ModeSession.open` builds the stack around one `AgentSession`: a `Router` over a `ModelPool`
(fast and deep), the `RoutedModel` the agent talks to (auto escalation), optionally a
`HealingModel` on top (best of N where the tests decide), and a sink that records routing
decisions in the session log. `run(task)` puts the request through the policy first: a refusal
ends the turn with the reason, a reroute sends it to deep, and either is shown as an item.
`set_mode` is the UI's `/mode`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whiz.agent.events import EventSink
from whiz.agent.heal_step import HealingModel
from whiz.agent.healing import Healer, HealSettings
from whiz.agent.model import ModelClient
from whiz.agent.modes import DeepSettings, FastSettings, Mode, ModelPool, Models, RoutedModel, Router
from whiz.agent.notices import ItemEmitter, Tee
from whiz.agent.policy import ChatModelCheck, Decision, Policy, PolicyAction
from whiz.agent.runner import AgentOptions, AgentSession
from whiz.agent.sessions import SessionStore, TurnRecord
from whiz.agent.stats import TurnResult, TurnStats
from whiz.agent.workspace import Workspace
from whiz.client import HttpClient

ROUTING_ITEMS = ("mode_change", "policy_decision")


@dataclass
class RunOptions:
    """What every mode-aware run needs besides its task."""

    workspace: Path
    mode: Mode = "fast"
    fast: FastSettings = field(default_factory=FastSettings)
    deep: DeepSettings = field(default_factory=DeepSettings)
    policy: PolicyAction = "refuse"
    policy_model_check: bool = False
    """Ask the fast model about requests the rules cannot decide."""
    home: Path | None = None


class SessionLog:
    """An `EventSink` that writes routing decisions into the session log (SQLite)."""

    def __init__(self, store: SessionStore, session_id: str):
        self.store = store
        self.session_id = session_id

    def __call__(self, event: dict[str, Any]) -> None:
        item = event.get("item") or {}
        if event.get("type") == "item.completed" and item.get("type") in ROUTING_ITEMS:
            self.store.log_event(self.session_id, item["type"], {k: v for k, v in item.items() if k != "id"})


HEAL_N_DEFAULT = 5
"""Candidates of a healing step in auto mode with a test command, unless told otherwise."""
HEAL_N_MAX = 16


def heal_candidates(heal: int | None, mode: Mode, agent: AgentOptions) -> int:
    """How many candidates the agent's healing steps decode (0: no healing): `heal`, or by
    default 5 in auto mode with a test command and text actions. ValueError says what is wrong."""
    if heal is None:
        return HEAL_N_DEFAULT if mode == "auto" and agent.test_cmd and agent.actions == "text" else 0
    if heal < 0 or heal > HEAL_N_MAX:
        raise ValueError(f"--heal takes a number of candidates from 0 (off) to {HEAL_N_MAX}")
    if heal > 1 and agent.actions != "text":
        raise ValueError("--heal needs --actions text (candidates are edit blocks)")
    return heal


async def check_policy(
    task: str, options: RunOptions, pool: Models, router: Router, emit: ItemEmitter
) -> Decision:
    """Run the policy on `task`; flagged requests are reported, and a reroute pins the turn to deep."""
    check = None
    http = None
    if options.policy_model_check and isinstance(pool, ModelPool):
        ep = await pool.endpoint("fast")
        http = HttpClient(ep.base_url, ep.api_key)
        check = ChatModelCheck(http, ep.model)
    try:
        decision = await Policy(options.policy, check).check(task)
    finally:
        if http is not None:
            await http.close()
    if decision.flagged:
        emit.single("policy_decision", **decision.item())
    if decision.action == "reroute:deep":
        router.pin_deep(f"the safety policy rerouted the request: {decision.verdict.reason}", "policy")
    return decision


def refuse(emit: ItemEmitter, decision: Decision) -> str:
    """End a refused request's turn; returns the message."""
    message = f"refused by the safety policy: {decision.verdict.reason}"
    turn_id = "turn_" + uuid.uuid4().hex[:12]
    emit.emit("turn.started", turn_id=turn_id)
    emit.emit("turn.failed", turn_id=turn_id, error={"message": message}, usage={})
    return message


class ModeSession:
    """One agent session with modes, healing and the policy. Use `open()`, `run()`, `close()`."""

    def __init__(
        self,
        session: AgentSession,
        router: Router,
        routed: RoutedModel,
        model: ModelClient,
        pool: Models,
        options: RunOptions,
    ):
        self.session = session
        self.router = router
        self.routed = routed
        self.model = model
        self.pool = pool
        self.options = options
        self.log = SessionLog(session.store, session.id)
        """Routing decisions go to the session log through this sink."""

    @property
    def agent(self):
        return self.session.agent

    @property
    def id(self) -> str:
        return self.session.id

    @classmethod
    async def open(
        cls,
        agent_options: AgentOptions,
        options: RunOptions,
        *,
        sink: EventSink,
        notice: Callable[[str], None] = lambda line: None,
        heal_n: int = 0,
        pool: Models | None = None,
    ) -> ModeSession:
        """Connect the current mode's model and open (or resume) the session; raises `SetupError`.

        With `heal_n` > 1 and a test command, the agent heals (see `HealingModel`)."""
        chain = Tee(sink)
        emit = ItemEmitter(chain)
        pool = pool or ModelPool(options.fast, options.deep, notice=notice)
        router = Router(pool, options.mode, emit)
        routed = RoutedModel(router)
        chain.sinks.append(routed.observe)
        model: ModelClient = routed
        if heal_n > 1 and agent_options.test_cmd:
            ws = Workspace(agent_options.workspace)
            healer = Healer(ws, agent_options.test_cmd, HealSettings(n=heal_n), emit=emit)
            model = HealingModel(routed, healer, router)
            chain.sinks.append(model.observe)
        try:
            await routed.connect()  # no server: one clear line now, not a failed turn
            session = await AgentSession.open(agent_options, sink=chain, notice=notice, model=model)
        except BaseException:
            await routed.close()
            await pool.close()
            raise
        opened = cls(session, router, routed, model, pool, options)
        chain.sinks.append(opened._log)
        return opened

    def _log(self, event: dict[str, Any]) -> None:
        # Into the session the agent is in now: the UI's /clear and /resume switch it.
        self.log.session_id = self.session.id
        self.log(event)

    async def run(self, task: str) -> TurnResult:
        """The policy, then the turn. A refused request ends as a failed turn with the reason."""
        decision = await check_policy(task, self.options, self.pool, self.router, self.router.emit)
        if decision.action != "refuse":
            return await self.session.run(task)
        message = refuse(self.router.emit, decision)
        record = TurnRecord("turn_" + uuid.uuid4().hex[:12], task, "refused", message, [], time.time())
        self.session.store.save(self.session.id, self.session.agent.items, record)
        return TurnResult(record.id, "failed", message, TurnStats())

    def set_mode(self, mode: Mode, reason: str = "the user chose it") -> None:
        """Switch between fast, deep and auto (announced as a `mode_change` when the model changes)."""
        self.router.set_mode(mode, reason)

    async def switch_mode(self, mode: Mode, reason: str = "the user chose it") -> None:
        """`set_mode`, once the model the mode starts with answers (the deep one may start in this
        process first). Raises `SetupError` with the reason, and changes nothing, if it cannot."""
        await self.routed.client("deep" if mode == "deep" else "fast")
        self.set_mode(mode, reason)

    async def close(self) -> None:
        await self.session.close()
        await self.routed.close()
        await self.pool.close()
