"""An agent session with modes, healing steps and the safety policy: what `whiz exec` and the
interactive UI drive.

`ModeSession.open` builds the stack around one `AgentSession`: a `Router` over a `ModelPool`
(fast and deep), the `RoutedModel` the agent talks to (auto escalation), with a test command a
`HealingModel` on top (best of N where the tests decide, on as `--heal` and the mode say), and
a sink that records routing decisions in the session log. The mode, the healing setting and
the test command are stored with the session, so a resume comes back as it was.
`run(task)` puts the request through the policy first: a refusal
ends the turn with the reason, a reroute sends it to deep, and either is shown as an item.
`set_mode` is the UI's `/mode`, `follow_session` what its `/resume` restores.
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
    comes back as the session was (flags given on the resume win), on the command line and in
    the UI's `/resume` alike. Healing follows the mode: a switch to auto turns on the healing
    steps it has when started in auto, a switch away turns them off again.
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
        chain: Tee | None = None,
        given: tuple[AgentOptions, RunOptions] | None = None,
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
        """The healing step, once there is a test command; `heal_n` says whether it is on."""
        self.chain = chain or Tee()
        """The agent's events go to these sinks (the healing step watches them too)."""
        self.given = given or (agent_options, options)
        """The options as given, before the stored session filled them in: what a `/resume` keeps."""
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
        given = agent_options, options
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
            model = healing = healing_step(
                routed, router, Workspace(agent_options.workspace), agent_options.test_cmd
            )
            chain.sinks.append(healing.observe)
        try:
            await routed.connect()  # no server: one clear line now, not a failed turn
            session = await AgentSession.open(agent_options, sink=chain, notice=notice, model=model)
        except BaseException:
            await routed.close()
            await pool.close()
            raise
        opened = cls(
            session,
            router,
            routed,
            model,
            pool,
            options,
            agent_options=agent_options,
            healing=healing,
            chain=chain,
            given=given,
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
            # The step stays once made; a session resumed without a test command must not heal.
            self.healing.healer.settings.n = n if self.agent_options.test_cmd else 0
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

    async def follow_session(self) -> str:
        """After the UI switched to another stored session (`/resume`): take up the mode, healing
        setting, test command and actions stored with it, as a resume on the command line does
        (what the UI was started with wins). Returns the line that says what is in force."""
        stored = dict(self.session.info.settings)
        agent_options, options = _restore(*self.given, stored)
        note = ""
        try:
            check_heal(options.heal, agent_options)
        except ValueError as exc:  # --heal N, and a session that acted with tool calls, say
            options = dataclasses.replace(options, heal=None)
            note = f"; healing off: {exc}"
        self._take_up(agent_options)
        self.options = dataclasses.replace(self.options, mode=options.mode, heal=options.heal)
        wanted, failed = options.mode, None
        if wanted != self.router.mode:
            if stored.get("mode") == wanted:
                why = f"the resumed session {self.id} was in {wanted} mode"
            else:
                why = f"--mode {wanted}" if self.given[1].mode else "the resumed session had no mode stored"
            try:
                await self.switch_mode(wanted, reason=why)
            except SetupError as exc:
                failed = f"{wanted} mode did not start ({exc.message}); staying in {self.router.mode} mode"
        self._follow_mode()
        if failed:
            return f"resumed {self.id}, but {failed}" + tests_clause(self) + note
        return resumed_notice(self, stored) + note

    def _take_up(self, agent_options: AgentOptions) -> None:
        """From the next turn on, the agent acts and tests as `agent_options` say (the healing step
        is made here when the session had no test command before)."""
        self.agent_options = agent_options
        test_cmd = agent_options.test_cmd
        self.agent.reconfigure(agent_options.actions or "text", test_cmd)
        if not test_cmd:
            return
        if self.healing is None:
            self.healing = healing_step(self.routed, self.router, self.agent.ws, test_cmd)
            self.model = self.agent.model = self.healing
            self.chain.sinks.append(self.healing.observe)
        self.healing.healer.test_cmd = test_cmd

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


def healing_step(routed: RoutedModel, router: Router, ws: Workspace, test_cmd: str) -> HealingModel:
    """The healing step between the agent and its routed model, off until `heal_n` says otherwise;
    its `observe` must see the agent's events."""
    healer = Healer(ws, test_cmd, HealSettings(n=0), emit=router.emit)
    return HealingModel(routed, healer, router)


def resumed_notice(session: ModeSession, stored: dict[str, Any]) -> str:
    """The line a resume starts with: the mode in force and where it came from, and the healing."""
    mode, was = session.router.mode, stored.get("mode")
    if was is None or was == mode:
        line = f"resumed {session.id} in {mode} mode"
        line += " (as it was; --mode overrides)" if was else ""
    else:
        line = f"resumed {session.id} in {mode} mode, as --mode says (it was in {was} mode)"
    return line + tests_clause(session)


def tests_clause(session: ModeSession) -> str:
    """What the notice says about the tests: the healing steps, the test command, or nothing."""
    test_cmd = session.agent_options.test_cmd
    if session.heal_n:
        return f"; healing steps of {session.heal_n} candidates where `{test_cmd}` decides"
    return f"; tests: `{test_cmd}`" if test_cmd else ""
