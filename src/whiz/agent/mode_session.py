"""An agent session with modes, healing steps and the safety policy: what `whiz exec` and the
interactive UI drive.

`ModeSession.open` builds the stack around one `AgentSession`: a `Router` over a `ModelPool`
(fast and deep), the `RoutedModel` the agent talks to (auto escalation), with a test command a
`HealingModel` on top (best of N where the tests decide, on as `--heal` and the mode say), and
a sink that records routing decisions in the session log. The mode, the healing setting and
the test command are stored with the session, so a resume comes back as it was.
`run(task)` puts the request through the policy first: a refusal
ends the turn with the reason, a reroute sends it to deep, and either is shown as an item.
`set_mode` is the UI's `/mode`.
"""

from __future__ import annotations

import dataclasses
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
from whiz.agent.modes import MODES, DeepSettings, FastSettings, Mode, ModelPool, Models, RoutedModel, Router
from whiz.agent.notices import ItemEmitter, Tee
from whiz.agent.policy import ChatModelCheck, Decision, Policy, PolicyAction
from whiz.agent.runner import AgentOptions, AgentSession, SetupError, resumed_settings
from whiz.agent.sessions import SessionStore, TurnRecord
from whiz.agent.stats import TurnResult, TurnStats
from whiz.agent.workspace import Workspace
from whiz.client import HttpClient

ROUTING_ITEMS = ("mode_change", "policy_decision")


@dataclass
class RunOptions:
    """What every mode-aware run needs besides its task."""

    workspace: Path
    mode: Mode | None = None
    """None: the resumed session's mode, else fast."""
    fast: FastSettings = field(default_factory=FastSettings)
    deep: DeepSettings = field(default_factory=DeepSettings)
    policy: PolicyAction = "refuse"
    policy_model_check: bool = False
    """Ask the fast model about requests the rules cannot decide."""
    home: Path | None = None
    heal: int | None = None
    """Candidates of the agent's healing steps (0: off). None: the resumed session's setting, else
    by the mode (see `heal_candidates`)."""


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
    check_heal(heal, agent)
    if heal is None:
        # actions None is text (or the resumed session's, which `ModeSession.open` looks up first)
        return HEAL_N_DEFAULT if mode == "auto" and agent.test_cmd and agent.actions != "tools" else 0
    return heal


def check_heal(heal: int | None, agent: AgentOptions) -> None:
    """ValueError, saying what is wrong, unless `heal` is a usable `--heal` (None: by the mode)."""
    if heal is None:
        return
    if heal < 0 or heal > HEAL_N_MAX:
        raise ValueError(f"--heal takes a number of candidates from 0 (off) to {HEAL_N_MAX}")
    if heal > 1 and agent.actions == "tools":
        raise ValueError("--heal needs --actions text (candidates are edit blocks)")


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
    """One agent session with modes, healing and the policy. Use `open()`, `run()`, `close()`.

    The mode, the healing setting and the test command are stored with the session, so a resume
    comes back as the session was (flags given on the resume win). Healing follows the mode: a
    switch to auto turns on the healing steps it has when started in auto, a switch away turns
    them off again.
    """

    def __init__(
        self,
        session: AgentSession,
        router: Router,
        routed: RoutedModel,
        model: ModelClient,
        pool: Models,
        options: RunOptions,
        *,
        agent_options: AgentOptions,
        healing: HealingModel | None = None,
    ):
        self.session = session
        self.router = router
        self.routed = routed
        self.model = model
        self.pool = pool
        self.options = options
        self.agent_options = agent_options
        """As the session runs: the test command and actions resolved against the stored session."""
        self.healing = healing
        """The healing step, when there is a test command; `heal_n` says whether it is on."""
        self.log = SessionLog(session.store, session.id)
        """Routing decisions go to the session log through this sink."""

    @property
    def agent(self):
        return self.session.agent

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def heal_n(self) -> int:
        """Candidates per healing step now (0: healing is off)."""
        return self.healing.healer.settings.n if self.healing and self.healing.active else 0

    @classmethod
    async def open(
        cls,
        agent_options: AgentOptions,
        options: RunOptions,
        *,
        sink: EventSink,
        notice: Callable[[str], None] = lambda line: None,
        pool: Models | None = None,
    ) -> ModeSession:
        """Connect the current mode's model and open (or resume) the session; raises `SetupError`.

        With a test command, the agent heals as `options.heal` and the mode say (`HealingModel`).
        A resumed session keeps the mode, healing setting and test command it had, unless
        `options` or `agent_options` give them; `notice` says which mode is in force."""
        stored = resumed_settings(agent_options)
        agent_options, options = _restore(agent_options, options, stored)  # the mode is set now
        try:
            heal_candidates(options.heal, options.mode, agent_options)
        except ValueError as exc:
            raise SetupError(str(exc)) from None
        chain = Tee(sink)
        emit = ItemEmitter(chain)
        pool = pool or ModelPool(options.fast, options.deep, notice=notice)
        router = Router(pool, options.mode, emit)
        routed = RoutedModel(router)
        chain.sinks.append(routed.observe)
        model: ModelClient = routed
        healing = None
        if agent_options.test_cmd:
            ws = Workspace(agent_options.workspace)
            healer = Healer(ws, agent_options.test_cmd, HealSettings(n=0), emit=emit)
            model = healing = HealingModel(routed, healer, router)
            chain.sinks.append(healing.observe)
        try:
            await routed.connect()  # no server: one clear line now, not a failed turn
            session = await AgentSession.open(agent_options, sink=chain, notice=notice, model=model)
        except BaseException:
            await routed.close()
            await pool.close()
            raise
        opened = cls(
            session, router, routed, model, pool, options, agent_options=agent_options, healing=healing
        )
        chain.sinks.append(opened._log)
        opened._follow_mode()
        if stored:
            notice(resumed_notice(opened, stored))
        return opened

    def _log(self, event: dict[str, Any]) -> None:
        # Into the session the agent is in now: the UI's /clear and /resume switch it.
        self.log.session_id = self.session.id
        self.log(event)

    def _follow_mode(self) -> None:
        """Healing as the mode says, and the mode and healing setting stored with the session."""
        if self.healing is not None:
            n = heal_candidates(self.options.heal, self.router.mode, self.agent_options)
            self.healing.healer.settings.n = n
        settings = {
            "mode": self.router.mode,
            "heal": self.options.heal,
            "test_cmd": self.agent_options.test_cmd,
        }
        self.session.info.settings = self.session.store.update_settings(self.session.id, settings)

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
        """Switch between fast, deep and auto (announced as a `mode_change` when the model changes),
        exactly as if the session had started in `mode`: healing follows, and the session keeps it."""
        self.router.set_mode(mode, reason)
        self._follow_mode()

    async def switch_mode(self, mode: Mode, reason: str = "the user chose it") -> None:
        """`set_mode`, once the model the mode starts with answers (the deep one may start in this
        process first). Raises `SetupError` with the reason, and changes nothing, if it cannot."""
        await self.routed.client("deep" if mode == "deep" else "fast")
        self.set_mode(mode, reason)

    async def follow_session(self) -> str | None:
        """After the UI switched to another stored session (`/resume`): take up the mode stored
        with it. Returns what changed, in words, or None when the mode stays as it is."""
        wanted = self.session.info.settings.get("mode")
        if wanted not in MODES or wanted == self.router.mode:
            self._follow_mode()
            return None
        try:
            await self.switch_mode(wanted, reason=f"the resumed session {self.id} was in {wanted} mode")
        except SetupError as exc:
            self._follow_mode()
            return f"the session was in {wanted} mode, but {exc.message}; staying in {self.router.mode} mode"
        return f"{wanted} mode, as the resumed session was"

    async def close(self) -> None:
        await self.session.close()
        await self.routed.close()
        await self.pool.close()


def _restore(
    agent: AgentOptions, options: RunOptions, stored: dict[str, Any]
) -> tuple[AgentOptions, RunOptions]:
    """The options with what a resumed session stored filling in what was not given; the mode is
    always set (given, else stored, else fast)."""
    mode = options.mode or (stored.get("mode") if stored.get("mode") in MODES else None)
    heal = options.heal if options.heal is not None else stored.get("heal")
    agent = dataclasses.replace(
        agent,
        actions=agent.actions or stored.get("actions") or "text",
        test_cmd=agent.test_cmd or stored.get("test_cmd"),
    )
    return agent, dataclasses.replace(options, mode=mode or "fast", heal=heal)


def resumed_notice(session: ModeSession, stored: dict[str, Any]) -> str:
    """The line a resume starts with: the mode in force and where it came from, and the healing."""
    mode, was = session.router.mode, stored.get("mode")
    if was is None or was == mode:
        line = f"resumed {session.id} in {mode} mode"
        line += " (as it was; --mode overrides)" if was else ""
    else:
        line = f"resumed {session.id} in {mode} mode, as --mode says (it was in {was} mode)"
    if session.heal_n:
        line += (
            f"; healing steps of {session.heal_n} candidates where `{session.agent_options.test_cmd}` decides"
        )
    elif session.agent_options.test_cmd:
        line += f"; tests: `{session.agent_options.test_cmd}`"
    return line
