"""An agent session: the agent, its stored record and undo history, and the mode and model choice
around it. `whiz exec`, `whiz resume` and the interactive UI all drive one `AgentSession`.

`AgentSession.open` builds it: a `ModeRouter` over a `ModelPool` (fast and deep), the `RoutedModel` the
agent talks to (auto escalation), with a test command a `HealingModel` on top (best of N where the
tests decide, on as `--heal` and the mode say), and a sink that records routing decisions in the
session log. The mode, the healing setting and the test command are stored with the session, so a
resume comes back as it was. `run(task)` puts the request through the policy first: a refusal
ends the turn with the reason, a reroute sends it to deep, and either is shown as an item.
`set_mode` is the UI's `/mode`, `follow_session` what its `/resume` restores.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from whiz.agent.approvals import ApprovalMode, Approvals, Approver
from whiz.agent.config import AgentConfig
from whiz.agent.context.compaction import Context
from whiz.agent.editing.undo import UndoStore
from whiz.agent.events import EventSink
from whiz.agent.loop import Agent
from whiz.agent.models.seam import ModelClient
from whiz.agent.project.workspace import Workspace
from whiz.agent.stats import TurnOutcome, TurnStats
from whiz.agent.store.journal import recover
from whiz.agent.store.session_lock import SessionBusy, SessionLock
from whiz.agent.store.sessions import SessionInfo, SessionStore, TurnRecord, data_home
from whiz.agent.turns import new_turn_id, turn
from whiz.client import HttpClient
from whiz.environments import SandboxOptions, SandboxUnavailable, environment_for
from whiz.environments.worktree import sweep_stale_copies
from whiz.mcp import McpServerConfig, start_mcp
from whiz.modes.endpoints import DeepSettings, FastSettings, SetupError
from whiz.modes.found_turn import FOUND_HEAL_N, FOUND_HYPOTHESES, FoundTurn
from whiz.modes.heal_step import REDRAW_N, HealingModel
from whiz.modes.healing import Healer, HealSettings
from whiz.modes.notices import ItemEmitter, Tee
from whiz.modes.policy import ChatModelCheck, Policy, PolicyAction, PolicyDecision
from whiz.modes.pool import ModelPool, Models
from whiz.modes.registry import Mode
from whiz.modes.router import ModeRouter, RoutedModel

ROUTING_ITEMS = ("mode_change", "policy_decision")


@dataclass
class SessionOptions:
    """How to open a session (and how `whiz heal` and `whiz swarm` run): composed of the agent's own
    settings and the models', plus what only a session has."""

    workspace: Path
    agent: AgentConfig = field(default_factory=AgentConfig)
    """How the agent acts; `agent.actions` None: text, or what the resumed session used."""
    fast: FastSettings = field(default_factory=FastSettings)
    deep: DeepSettings = field(default_factory=DeepSettings)
    mode: Mode | None = None
    """None: the resumed session's mode, else fast. A mode's name is read as that mode."""
    heal: int | None = None
    """Candidates of the agent's healing steps (0: off). None: the resumed session's setting, else
    by the mode (see `heal_candidates`)."""
    policy: PolicyAction = "refuse"
    policy_model_check: bool = False
    """Ask the fast model about requests the rules cannot decide."""
    resume: str | None = None
    """A session id to continue, or "last" for the latest session in this workspace."""
    home: Path | None = None
    """Where sessions and undo history live (default: the whiz data home)."""
    mcp: list[McpServerConfig] = field(default_factory=list)
    """MCP servers whose tools the agent is offered: started when the session opens, stopped when
    it closes (`whiz.mcp`)."""
    seed: int | None = None
    """Seeds the healing steps' sampled candidates (None: `HealSettings`' default), so that runs
    with different seeds draw apart (`whiz bench agent --seeds`)."""
    heal_budget_s: float | None = HealSettings.budget_s
    """Seconds a healing step may go on starting rungs (`HealSettings.budget_s`; None: no bound)."""
    mutants: bool = HealSettings.mutants
    """Whether a healing step tests the localized function's one-token changes (`HealSettings.mutants`)."""
    trace: bool = HealSettings.trace
    """Whether a healing step's later rewrites see the failing call traced (`HealSettings.trace`)."""

    def __post_init__(self) -> None:
        if self.mode is not None:
            self.mode = Mode.named(self.mode)


class SessionLog:
    """An `EventSink` that writes routing decisions into the session log (SQLite)."""

    def __init__(self, store: SessionStore, session_id: str):
        self.store = store
        self.session_id = session_id

    def __call__(self, event: dict[str, Any]) -> None:
        item = event.get("item") or {}
        if event.get("type") == "item.completed" and item.get("type") in ROUTING_ITEMS:
            self.store.log_event(self.session_id, item["type"], {k: v for k, v in item.items() if k != "id"})


HEAL_N_DEFAULT = 8
"""Candidates of a healing step in auto mode with a test command, unless told otherwise. The
ladder stops at the first pass, so more only costs where the task fails; a fix a small model
finds in about one rewrite in ten is found about half the time in the seven rewrites of a
deep-started turn, a third of the time in four."""


def heal_candidates(heal: int | None, mode: Mode, agent: AgentConfig) -> int:
    """How many candidates the agent's healing steps decode (0: no healing): `heal`, or by
    default `HEAL_N_DEFAULT` in auto mode with a test command and text actions. Never in a
    read-only session: healing runs the test command on the candidates. ValueError says what is
    wrong."""
    check_heal(heal, agent)
    if agent.approval is ApprovalMode.READ_ONLY:
        return 0
    if heal is None:
        # actions None is text (or the resumed session's, which `AgentSession.open` looks up first)
        return HEAL_N_DEFAULT if mode.heals and agent.test_cmd and agent.actions != "tools" else 0
    return heal


def ladder(settings: HealSettings, mode: Mode) -> None:
    """Auto mode heals as a ladder, cheapest first, one candidate after another, ending at the
    first pass (`HealSettings.ladder`): the fast model's most likely reply, the deep model's, then
    (for a new file) sampled fast candidates. On this project's CPUs a batch of N costs about N/2
    lone replies and a lone reply drafts from the prompt, so one after another costs about the
    same in all, and a task the first reply solves is done in the time of one (about 8x sooner
    than a batch of five). The other modes' `--heal N` decodes N together, in two rounds."""
    settings.ladder = mode.heals
    settings.parallel = not mode.heals


def check_heal(heal: int | None, agent: AgentConfig) -> None:
    """ValueError, saying what is wrong, unless `heal` is a usable `--heal` (None: by the mode)."""
    if heal is None:
        return
    if heal < 0 or heal > HealSettings.MAX_N:
        raise ValueError(f"--heal takes a number of candidates from 0 (off) to {HealSettings.MAX_N}")
    if heal > 1 and agent.actions == "tools":
        raise ValueError("--heal needs --actions text (candidates are edit blocks)")
    if heal > 1 and agent.approval is ApprovalMode.READ_ONLY:
        raise ValueError(
            "--heal runs the test command on candidates; it does not go with --approval read-only"
        )


async def check_policy(
    task: str, options: SessionOptions, pool: Models, router: ModeRouter, emit: ItemEmitter
) -> PolicyDecision:
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


T = TypeVar("T")


class _Stopped(Exception):
    """The user stopped `AgentSession.run` before its turn began."""


def refuse(emit: ItemEmitter, decision: PolicyDecision) -> str:
    """End a refused request's turn; returns the message."""
    message = f"refused by the safety policy: {decision.verdict.reason}"
    with turn(emit) as t:
        t.failed(message)
    return message


class AgentSession:
    """One agent session: the agent, its stored record and undo history, and the mode and model
    choice around it. Use `open()`, then `run()`, `close()`.

    The mode, the healing setting and the test command are stored with the session, so a resume
    comes back as the session was (flags given on the resume win), on the command line and in
    the UI's `/resume` alike. Healing follows the mode: a switch to auto turns on the healing
    steps it has when started in auto, a switch away turns them off again.
    """

    def __init__(
        self,
        agent: Agent,
        store: SessionStore,
        info: SessionInfo,
        undo: UndoStore,
        *,
        router: ModeRouter,
        routed: RoutedModel,
        pool: Models,
        options: SessionOptions,
        given: SessionOptions,
        healing: HealingModel | None,
        chain: Tee,
        lock: SessionLock,
    ):
        self.agent = agent
        self.store = store
        self.info = info
        self.undo_store = undo
        self.router = router
        self.routed = routed
        self.pool = pool
        self.options = options
        """As the session runs: the test command, actions and mode resolved against the stored session."""
        self.given = given
        """The options as given, before the stored session filled them in: what a `/resume` keeps."""
        self.healing = healing
        """The healing step, once there is a test command; `heal_n` says whether it is on."""
        self.chain = chain
        """The agent's events go to these sinks (the healing step watches them too)."""
        self.log = SessionLog(store, info.id)
        """Routing decisions go to the session log through this sink."""
        self.lock = lock
        """This process's hold on the session, from open to close (another whiz is refused)."""
        self._saved_compactions = agent.compactions
        self._found_item: dict[str, Any] = {}
        """The running turn's `found_checks` item, completed when the turn ends."""
        self._stop = False
        """Whether the user stopped the running `run` (`cancel`)."""
        self._before: asyncio.Future | None = None
        """The work before the turn that runs now (the policy's check, the found checks)."""
        remember_turns(agent, store, info.id)

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def model(self) -> ModelClient:
        """What the agent asks: the healing step where there is one, else the routed model."""
        return self.agent.model

    @property
    def heal_n(self) -> int:
        """Candidates per healing step now (0: healing is off)."""
        return self.healing.healer.settings.n if self.healing and self.healing.active else 0

    @classmethod
    async def open(
        cls,
        options: SessionOptions,
        *,
        sink: EventSink = lambda event: None,
        notice: Callable[[str], None] = lambda line: None,
        pool: Models | None = None,
        approver: Approver | None = None,
    ) -> AgentSession:
        """Connect the current mode's model and open (or resume) the session; raises `SetupError`.

        With a test command, the agent heals as `options.heal` and the mode say (`HealingModel`).
        A resumed session keeps the mode, healing setting and test command it had, unless
        `options` gives them; `notice` says which mode is in force."""
        check_sandbox(options.workspace, options.agent.sandbox)
        home = options.home or data_home()
        store = SessionStore(home / "sessions.db")
        lock = None
        try:
            info = find_session(store, options)
            # Before tidying: a session another whiz holds may be mid-apply in this workspace.
            lock = hold(home, info.id) if info else None
            tidy_workspace(options.workspace, notice)
            stored = dict(info.settings) if info else {}
            given, options = options, _restore(options, stored)  # the mode and actions are set now
            heal_candidates(options.heal, options.mode or Mode.FAST, options.agent)
        except ValueError as exc:
            store.close()
            release(lock)
            raise SetupError(str(exc)) from None
        except BaseException:
            store.close()
            release(lock)
            raise
        chain = Tee(sink)
        emit = ItemEmitter(chain)
        pool = pool or ModelPool(options.fast, options.deep, notice=notice)
        router = ModeRouter(pool, options.mode or Mode.FAST, emit)
        routed = RoutedModel(router, test_cmd=options.agent.test_cmd)
        chain.sinks.append(routed.observe)
        model: ModelClient = routed
        healing = None
        ws = Workspace(options.workspace, options.agent.secrets)
        if options.agent.test_cmd:
            model = healing = healing_step(routed, router, ws, options.agent, options)
            chain.sinks.append(healing.observe)
        try:
            await routed.connect()  # no server: one clear line now, not a failed turn
        except BaseException:
            await routed.close()
            await pool.close()
            store.close()
            release(lock)
            raise
        if info is None:
            settings = {"actions": options.agent.actions, "approval": str(options.agent.approval)}
            info, items = store.create(options.workspace, settings=settings), []
            lock = hold(home, info.id)
        else:
            items = store.items(info.id)
        undo = UndoStore(home / "undo" / info.id)
        approvals = Approvals(options.agent.approval, approver, preapproved=[options.agent.test_cmd or ""])
        agent = Agent(
            model, ws, config=options.agent, sink=chain, approvals=approvals, undo=undo, items=items
        )
        agent.tools.external = start_mcp(options.mcp, options.workspace, home / "mcp", notice)
        # Auto mode: a turn over its budget goes on with the deep model instead of failing.
        agent.on_over_budget = lambda reason: router.escalate(reason, "budget")
        chain({"type": "thread.started", "thread_id": info.id})
        if agent.project.files or agent.project.warnings:  # which AGENTS.md files the model reads
            emit.single("project_instructions", **agent.project.item())
        opened = cls(
            agent,
            store,
            info,
            undo,
            router=router,
            routed=routed,
            pool=pool,
            options=options,
            given=given,
            healing=healing,
            chain=chain,
            lock=lock,
        )
        chain.sinks.append(opened._log)
        opened._follow_mode()
        if stored:
            notice(resumed_notice(opened, stored))
        return opened

    def _log(self, event: dict[str, Any]) -> None:
        # Into the session the agent is in now: the UI's /clear and /resume switch it.
        self.log.session_id = self.info.id
        self.log(event)

    def _follow_mode(self) -> None:
        """Healing as the mode says, and the mode and healing setting stored with the session."""
        if self.healing is not None:
            n = heal_candidates(self.options.heal, self.router.mode, self.options.agent)
            # The step stays once made; a session resumed without a test command must not heal.
            settings = self.healing.healer.settings
            settings.n = n if self.options.agent.test_cmd else 0
            ladder(settings, self.router.mode)
            # Candidates run the tests in copies, which a read-only session does not (as `--heal`).
            read_only = self.options.agent.approval is ApprovalMode.READ_ONLY
            tests = self.options.agent.test_cmd and not read_only
            self.healing.redraw_n = REDRAW_N if tests else 0
        settings = {
            "mode": self.router.mode,
            "heal": self.options.heal,
            "test_cmd": self.options.agent.test_cmd,
        }
        self.info.settings = self.store.update_settings(self.id, settings)

    async def run(self, task: str) -> TurnOutcome:
        """The policy, then the turn; the conversation and the turn are stored when it ends, however
        it ends. A refused request ends as a failed turn with the reason. The mode picks the model
        the turn starts with from the task (auto: deep for a change of behaviour)."""
        self._stop = False
        self.router.start(task)
        found = None
        try:
            decision = await self._before_turn(
                check_policy(task, self.options, self.pool, self.router, self.router.emit)
            )
            if decision.action == "refuse":
                message = refuse(self.router.emit, decision)
                record = TurnRecord(new_turn_id(), task, "refused", message, [], time.time())
                self._save(record)
                return TurnOutcome(record.id, "failed", message, TurnStats())
            found = await self._before_turn(self._found_checks(task))
            if self._stop:
                raise _Stopped
            result = await self.agent.run(task)  # a conversation too long for the window is compacted first
        except _Stopped:
            result = self._stopped_turn()
        finally:
            if found is not None and found.runs:
                self._drop_found(found)
        if found is not None:
            await self._report_found(found, result, run=not self._stop)
        record = TurnRecord(
            result.turn_id,
            task,
            result.status,
            result.message,
            result.changed,
            time.time(),
            result.stats.usage(),
        )
        self._save(record)
        return result

    def cancel(self) -> None:
        """Stop `run` now: the turn's step (`Agent.cancel`), or, while the work before the turn
        runs (the policy's check, the found checks' first run), that work, and then the turn
        does not start. Then the found checks do not run again on what the turn left. (The
        agent alone has no turn to stop before its own starts: a Ctrl-C there was lost.)"""
        self._stop = True
        if self.agent.steps.running:
            self.agent.cancel()
        elif self._before is not None:
            self._before.cancel()

    async def _before_turn(self, work: Awaitable[T]) -> T:
        """`work`, done before the turn, as a task `cancel` stops; `_Stopped` where it did."""
        if self._stop:
            close = getattr(work, "close", None)
            if close is not None:
                close()  # a coroutine never awaited
            raise _Stopped
        self._before = asyncio.ensure_future(work)
        try:
            return await self._before
        except asyncio.CancelledError:
            if not self._stop:
                raise  # the caller's own cancellation
            raise _Stopped from None
        finally:
            self._before = None

    def _stopped_turn(self) -> TurnOutcome:
        """The turn of a `run` the user stopped before it began: ended at once, as cancelled."""
        message = "cancelled by the user"
        with turn(self.router.emit) as t:
            t.failed(message)
        return TurnOutcome(t.id, "cancelled", message, TurnStats())

    async def _found_checks(self, task: str) -> FoundTurn | None:
        """The checks the user's code already has for the function `task` is about (`found_turn.py`),
        announced as a `found_checks` item. Where no test command is given and they run, they are
        this turn's test command, and choose among candidates where some fail now; with one, they
        run beside it in the healing step's copies (`Healer.guard`). None where
        `AgentConfig.found_checks` is off, or none was found."""
        config = self.options.agent
        if not config.found_checks:
            return None
        ws, approvals, env = self.agent.ws, self.agent.approvals, self.agent.env
        found = await FoundTurn.prepare(ws, task, approvals, env, test_cmd=config.test_cmd)
        if not found.found:
            return None  # nothing to say
        self._found_item = self.router.emit.start("found_checks", **found.item(), status="in_progress")
        if found.runs and config.test_cmd:
            if self.healing is not None:
                self.healing.healer.guard = found.command
        elif found.runs:
            self._use_found(found)
        return found

    def _use_found(self, found: FoundTurn) -> None:
        """This turn, the found checks are the test command: they run after an edit, and, where
        some fail on the code as it is and the mode heals, a short ladder of candidates is
        tested on them."""
        assert found.command is not None
        agent = dataclasses.replace(self.options.agent, test_cmd=found.command)
        self._take_up(agent)
        if self.healing is None:
            return
        heals = self.router.mode.heals and agent.actions != "tools"
        n = self.options.heal if self.options.heal is not None else FOUND_HEAL_N
        settings = self.healing.healer.settings
        settings.n = n if found.chooses and heals else 0
        settings.hypotheses = FOUND_HYPOTHESES
        ladder(settings, self.router.mode)
        self.healing.redraw_n = REDRAW_N
        self.healing.healer.saw_tests(found.seconds)
        self.healing.healer.failing_now = found.output if found.chooses else None

    def _drop_found(self, found: FoundTurn) -> None:
        """After the turn: the test command as the session had it (none, where the found checks stood
        for it), and healing as the session had it. (The agent's config is the session's: taking
        up the found checks wrote their command into it.)"""
        if self.healing is not None:
            self.healing.healer.guard = None
        if found.status == "beside":  # the session's own test command stayed
            return
        self._take_up(dataclasses.replace(self.options.agent, test_cmd=None))
        if self.healing is not None:
            self.healing.healer.failing_now = None
            self.healing.healer.settings.hypotheses = HealSettings.hypotheses
        self._follow_mode()

    async def _report_found(self, found: FoundTurn, result: TurnOutcome, *, run: bool = True) -> None:
        """Run the found checks on what the turn left (`run`: not when the user stopped it),
        complete their item, and end the turn's message with which ran and how they came out."""
        if run:
            await found.finish(self.agent.env)
        item = {**self._found_item, **found.item(), "status": "completed"}
        self.router.emit.emit("item.completed", item=item)
        result.message = f"{result.message}\n{found.summary()}"

    def _save(self, record: TurnRecord | None = None) -> None:
        """Store the conversation (anew, when compaction rewrote it since) and the turn that ended."""
        rewrite = self.agent.compactions != self._saved_compactions
        self.store.save(self.id, self.agent.items, record, rewrite=rewrite)
        self._saved_compactions = self.agent.compactions

    async def compact(self) -> dict[str, Any] | None:
        """Compact the conversation now (the UI's /compact) and store it; the `context_compacted`
        item's fields, or None when there was nothing to compact or no window is known."""
        done = await self.agent.compact(force=True)
        if done is None:
            return None
        self._save()
        return done.item()

    def switch_to(self, info: SessionInfo, items: list[dict[str, Any]]) -> None:
        """Take up another stored session in this process (the UI's /clear and /resume): its lock,
        record, conversation and undo history. `SetupError` when another whiz holds it."""
        lock = hold(self.lock.home, info.id) if info.id != self.id else self.lock
        if lock is not self.lock:
            self.lock.release()
            self.lock = lock
        self.info = info
        self.undo_store = UndoStore(self.undo_store.directory.parent / info.id)
        self.agent.tools.undo = self.undo_store
        self.agent.items = items
        self.agent.context = Context(test_cmd=self.agent.config.test_cmd)
        self._saved_compactions = self.agent.compactions
        remember_turns(self.agent, self.store, info.id)

    def undo(self) -> list[str] | None:
        """Restore the files of the latest turn that changed any; None when there is nothing to undo."""
        undone = self.undo_store.undo(self.agent.ws)
        if undone is None:
            return None
        restored = undone.restored
        if restored:
            note = undo_note(restored, undone.merged)
            self.agent.items.append({"type": "message", "role": "user", "content": note})
            self._save()
        return restored

    def set_mode(self, mode: Mode, reason: str = "the user chose it") -> None:
        """Switch between fast, deep and auto (announced as a `mode_change` when the model changes),
        exactly as if the session had started in `mode`: healing follows, and the session keeps it."""
        self.router.set_mode(mode, reason)
        self._follow_mode()

    async def switch_mode(self, mode: Mode, reason: str = "the user chose it") -> None:
        """`set_mode`, once the model the mode starts with answers (the deep one may start in this
        process first). Raises `SetupError` with the reason, and changes nothing, if it cannot."""
        await self.routed.client(Mode.named(mode).first)
        self.set_mode(mode, reason)

    async def follow_session(self) -> str:
        """After the UI switched to another stored session (`/resume`): take up the mode, healing
        setting, test command and actions stored with it, as a resume on the command line does
        (what the UI was started with wins). Returns the line that says what is in force."""
        stored = dict(self.info.settings)
        options = _restore(self.given, stored)
        note = ""
        try:
            check_heal(options.heal, options.agent)
        except ValueError as exc:  # --heal N, and a session that acted with tool calls, say
            options = dataclasses.replace(options, heal=None)
            note = f"; healing off: {exc}"
        self._take_up(options.agent)
        self.options = dataclasses.replace(
            self.options, mode=options.mode, heal=options.heal, agent=options.agent
        )
        wanted, failed = options.mode or Mode.FAST, None
        if wanted is not self.router.mode:
            if Mode.read(stored.get("mode")) is wanted:
                why = f"the resumed session {self.id} was in {wanted} mode"
            else:
                why = f"--mode {wanted}" if self.given.mode else "the resumed session had no mode stored"
            try:
                await self.switch_mode(wanted, reason=why)
            except SetupError as exc:
                failed = f"{wanted} mode did not start ({exc.message}); staying in {self.router.mode} mode"
        self._follow_mode()
        if failed:
            return f"resumed {self.id}, but {failed}" + tests_clause(self) + note
        return resumed_notice(self, stored) + note

    def _take_up(self, agent: AgentConfig) -> None:
        """From the next turn on, the agent acts and tests as `agent` says (the healing step is made
        here when the session had no test command before)."""
        test_cmd = agent.test_cmd
        self.agent.reconfigure(agent.actions or "text", test_cmd)
        self.routed.test_cmd = test_cmd
        if not test_cmd:
            return
        if self.healing is None:
            self.healing = healing_step(self.routed, self.router, self.agent.ws, agent, self.options)
            self.agent.model = self.healing
            self.chain.sinks.append(self.healing.observe)
        self.healing.healer.test_cmd = test_cmd

    async def close(self) -> None:
        if self.agent.tools.external is not None:
            await self.agent.tools.external.close()
        self.lock.release()
        self.store.close()
        await self.routed.close()
        await self.pool.close()


def hold(home: Path, session_id: str) -> SessionLock:
    """This process's lock on the session; `SetupError` naming the process that holds it."""
    try:
        return SessionLock.acquire(home, session_id)
    except SessionBusy as exc:
        raise SetupError(exc.message) from None


def release(lock: SessionLock | None) -> None:
    if lock is not None:
        lock.release()


def remember_turns(agent: Agent, store: SessionStore, session_id: str) -> None:
    """Seed the agent's context with the stored turns' tasks and changed files, so a compaction of a
    resumed session keeps them too."""
    for record in store.turns(session_id):
        agent.context.note_turn(record.task, record.changed)


def tidy_workspace(root: Path, say: Callable[[str], None]) -> None:
    """What a whiz that was killed left behind, put right at the next start in `root`: an apply cut
    short is finished or taken back (`recover`), and heal and swarm copies are removed."""
    for line in recover(root):
        say(line)
    if stale := sweep_stale_copies(root):
        say(f"removed {len(stale)} copies of the workspace that a stopped whiz left behind")


def check_sandbox(workspace: Path, sandbox: SandboxOptions) -> None:
    """`SetupError` with the one-line reason when commands cannot be confined as `sandbox` says: a
    session refuses to start rather than run model-written code unconfined."""
    try:
        environment_for(workspace, sandbox)
    except SandboxUnavailable as exc:
        raise SetupError(exc.message) from None


def undo_note(restored: list[str], merged: list[str] = ()) -> str:
    """What the model is told after the user undid its changes (`merged`: files the user had edited
    since, whose later edits were kept)."""
    if not merged:
        return f"(The user undid your last changes to {', '.join(restored)}; those files are as before.)"
    return (
        f"(The user undid your last changes to {', '.join(restored)}; the user's own later edits to "
        f"{', '.join(merged)} were kept.)"
    )


def find_session(store: SessionStore, options: SessionOptions) -> SessionInfo | None:
    """The stored session `options.resume` names (None when it names none: a new session).
    Raises `SetupError` when there is no such session."""
    if options.resume is None:
        return None
    if options.resume == "last":
        info = store.latest(options.workspace)
        if info is None:
            raise SetupError(f"no session to resume in {Path(options.workspace).resolve()}")
    else:
        info = store.get(options.resume)
        if info is None:
            raise SetupError(f"no session {options.resume!r}; `whiz resume` lists them")
    return info


def resumed_settings(options: SessionOptions) -> dict[str, Any]:
    """The settings stored with the session `options.resume` names ({} for a new session), read
    before connecting: what the session ran with decides which model to connect. `SetupError`
    when there is no such session."""
    if options.resume is None:
        return {}
    store = SessionStore((options.home or data_home()) / "sessions.db")
    try:
        info = find_session(store, options)
    finally:
        store.close()
    return dict(info.settings) if info else {}


def _restore(options: SessionOptions, stored: dict[str, Any]) -> SessionOptions:
    """The options with what a resumed session stored filling in what was not given; the mode and
    the actions are always set (given, else stored, else fast and text)."""
    mode = options.mode or Mode.read(stored.get("mode"))
    heal = options.heal if options.heal is not None else stored.get("heal")
    agent = dataclasses.replace(
        options.agent,
        actions=options.agent.actions or stored.get("actions") or "text",
        test_cmd=options.agent.test_cmd or stored.get("test_cmd"),
    )
    return dataclasses.replace(options, mode=mode or Mode.FAST, heal=heal, agent=agent)


def healing_step(
    routed: RoutedModel, router: ModeRouter, ws: Workspace, agent: AgentConfig, options: SessionOptions
) -> HealingModel:
    """The healing step between the agent and its routed model, off until `heal_n` says otherwise;
    its `observe` must see the agent's events. Candidates' tests are confined as the agent's are;
    the session's options give the seed (None: the default), the time budget, the mutants and
    the trace."""
    assert agent.test_cmd
    settings = HealSettings(
        n=0,
        sandbox=agent.sandbox,
        budget_s=options.heal_budget_s,
        mutants=options.mutants,
        trace=options.trace,
    )
    if options.seed is not None:
        settings.seed = options.seed
    healer = Healer(ws, agent.test_cmd, settings, emit=router.emit)
    return HealingModel(routed, healer, router)


def resumed_notice(session: AgentSession, stored: dict[str, Any]) -> str:
    """The line a resume starts with: the mode in force and where it came from, and the healing."""
    mode, was = session.router.mode, stored.get("mode")
    if was is None or Mode.read(was) is mode:
        line = f"resumed {session.id} in {mode} mode"
        line += " (as it was; --mode overrides)" if was else ""
    else:
        line = f"resumed {session.id} in {mode} mode, as --mode says (it was in {was} mode)"
    return line + tests_clause(session)


def tests_clause(session: AgentSession) -> str:
    """What the notice says about the tests: the healing steps, the test command, or nothing."""
    test_cmd = session.options.agent.test_cmd
    if session.heal_n:
        return f"; healing steps of {session.heal_n} candidates where `{test_cmd}` decides"
    return f"; tests: `{test_cmd}`" if test_cmd else ""
