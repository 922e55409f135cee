"""The agent: `run(task)` loops `step()`, and a step is `execute(query())`.

Control flow uses the exceptions of `signals.py`, caught in one place (`_turn`): `Submitted` ends
the turn done, `Failed` ends it with a reason, `Cancelled` when the user stopped it, and
`FormatError` (a malformed action) sends feedback and lets the model try again, twice at most.
What a small model needs to get an edit out of a retry (redraws without the replies that owed
one, the failing tests, functions shown without bodies) is the policy of `retries.py`: the loop
asks it what to send, tells it what each reply did, and resets it each turn.

The agent never prints: everything it does is an event for its sink (`events.py`). A UI drives
it with `run()` (a turn), `steer()` (a message delivered at the next step boundary) and `cancel()`
(stop now; the server stops generating too). Call them from the event loop's thread.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from whiz.agent.approvals import ApprovalMode, Approvals
from whiz.agent.checks import check_files
from whiz.agent.config import AgentConfig
from whiz.agent.context.compaction import Compacted, Context, ContextFull
from whiz.agent.context.instructions import read_instructions
from whiz.agent.context.prompt import system_prompt, task_message
from whiz.agent.control import Budget, Steps
from whiz.agent.editing.undo import UndoStore
from whiz.agent.events import Emitter, EventSink
from whiz.agent.formats import TOOLS, ActionFormat, text_actions, tool_action, unparsed_calls
from whiz.agent.intent import asks_for_change, code_without_edit
from whiz.agent.intent import named_paths as intent_paths
from whiz.agent.models.seam import ModelClient, ModelRequest, unwrapped
from whiz.agent.named_fix import framed
from whiz.agent.project.secret_files import SecretGate, redact
from whiz.agent.project.test_files import named_paths
from whiz.agent.project.workspace import Workspace
from whiz.agent.rename_turn import rename_exactly
from whiz.agent.reply import Reply, cut_off, read_reply
from whiz.agent.retries import Retries
from whiz.agent.runs_check import shown
from whiz.agent.signals import Cancelled, Failed, FormatError, OverBudget, Submitted
from whiz.agent.stall_end import end_stalled, new_stall, stall_after, stall_before
from whiz.agent.stalls import ToolStall
from whiz.agent.stats import TurnOutcome, TurnStats
from whiz.agent.tools import Action, ApplyEdits, Malformed, Outcome, Toolbox, WriteFailed
from whiz.agent.turns import Progress, Turn, turn
from whiz.client import ClientError, ResponseError
from whiz.environments import Environment

Actions = list[tuple[Action, str | None]]  # a reply's actions, each with its tool call's id (None in text)


class Agent:
    """A coding agent over one workspace and one model. `items` is the conversation so far."""

    def __init__(
        self,
        model: ModelClient,
        workspace: Workspace,
        *,
        config: AgentConfig | None = None,
        sink: EventSink | None = None,
        approvals: Approvals | None = None,
        environment: Environment | None = None,
        undo: UndoStore | None = None,
        items: list[dict[str, Any]] | None = None,
        instructions: str | None = None,
    ):
        self.model = model
        self.ws = workspace
        self.config = config or AgentConfig()
        self.config.actions = self.config.actions or "text"
        self.emit = Emitter(sink or (lambda event: None))
        cfg, timeout_s = self.config, self.config.command_timeout_s
        self.approvals = approvals or Approvals(cfg.approval, preapproved=[cfg.test_cmd or ""])
        secrets = SecretGate(workspace)
        self.env = environment or secrets.environment(cfg.sandbox, timeout_s)
        kept = {"undo": undo, "command_timeout_s": timeout_s, "secrets": secrets}
        self.tools = Toolbox(workspace, self.env, self.approvals, self.emit, **kept)
        self.items: list[dict[str, Any]] = items if items is not None else []
        self.project = read_instructions(workspace, cfg.instructions_tokens)  # AGENTS.md files
        self.instructions = instructions or self.default_instructions()
        self.retries = Retries(workspace, self.config)
        """The small-model retry policy (`retries.py`)."""
        self._steering: deque[str] = deque()
        self.steps = Steps(lambda: self.model.cancel(), self.config)
        """The step that runs now, and whether the user stopped the turn (`control.py`)."""
        self.progress = Progress()
        """What the running (or the last) turn has done so far."""
        self.stall = ToolStall("", ())
        """Whether the running turn's tool calls still make progress (`stalls.py`)."""
        self.budget, self.stats = Budget(self.config), TurnStats()
        self.on_over_budget: Callable[[str], bool] | None = None
        """Called with the reason when the turn runs over its budget: True when a deeper model
        takes over (auto mode), and the turn goes on with a fresh budget; else the turn fails."""
        self.context = Context(test_cmd=self.config.test_cmd)
        """The context window's use, and what a compaction keeps (see `compaction.py`)."""
        self.compactions = 0
        """How many times `items` was rewritten by compaction (a store must then rewrite it too)."""
        self._turn_start: int | None = None
        self._prediction: str | None = None  # the first request's, for a named fix (`named_fix`)

    def default_instructions(self) -> str:
        """The system prompt for the agent's config and approval mode as they are now (write it
        to `instructions` again after changing them)."""
        read_only, cfg = self.approvals.mode is ApprovalMode.READ_ONLY, self.config
        options = {"test_cmd": cfg.test_cmd, "map_tokens": cfg.map_tokens, "project": self.project.render()}
        return system_prompt(self.ws, cfg.actions, read_only=read_only, **options)

    def reconfigure(self, actions: ActionFormat, test_cmd: str | None) -> None:
        """Act in `actions` and test with `test_cmd` (None: no tests) from the next turn on: the
        test command becomes the pre-approved one, and the instructions say so."""
        if self.config.test_cmd:
            self.approvals.preapproved.discard(self.config.test_cmd.strip())
        if test_cmd and test_cmd.strip():
            self.approvals.preapproved.add(test_cmd.strip())
        self.config.actions, self.config.test_cmd, self.context.test_cmd = actions, test_cmd, test_cmd
        self.instructions = self.default_instructions()

    # -- driving the agent -------------------------------------------------------------------------

    def steer(self, text: str) -> None:
        """Queue a message from the user; the model reads it before its next step."""
        if text.strip():
            self._steering.append(text.strip())

    def cancel(self) -> None:
        """Stop the turn now. A model call is cancelled on the server; a command is killed."""
        self.steps.cancel()

    async def run(self, task: str, *, from_user: bool = True) -> TurnOutcome:
        """One turn: the task, then steps until it is done, fails or is cancelled. A task not
        `from_user` (a planner wrote it) grants no secret file it names; their values are masked."""
        with self.steps.turn(), turn(self.emit) as t:
            return await self._turn(t, task, from_user)

    async def _turn(self, t: Turn, task: str, from_user: bool = True) -> TurnOutcome:
        read_only = self.approvals.mode is ApprovalMode.READ_ONLY
        wants = self.config.require_change and not read_only and asks_for_change(task)  # intent.py
        self.stats, self.progress, retries = TurnStats(), Progress(task, wants_change=wants), 0
        self.steps.cancelled = False
        started = time.perf_counter()
        self.tools.begin_turn(t.id)
        self.retries.begin_turn(self.progress)
        self.budget.fresh(self.stats.budgeted_tokens)
        first = not any(i.get("role") == "user" for i in self.items)
        if from_user:
            self.tools.secrets.grant_named(task)  # the user asked for that file by name
        tokens = self.config.code_tokens
        text, attached = task_message(self.ws, task, code_tokens=tokens, first=first, named_secrets=from_user)
        # A task not from the user gets every withheld value masked; any task, private keys.
        text = self.tools.secrets.redact(text) if not from_user else redact(text, set())
        # A fix of one named function: written once, not twice in SEARCH/REPLACE.
        text, self._prediction = framed(self.ws, task, text, wanted=wants and self.config.actions == "text")
        self.stall = await new_stall(self, task, text)
        self._turn_start = len(self.items)
        self.context.note_turn(task)
        self.items.append({"type": "message", "role": "user", "content": text})
        self.tools.focus = attached[-1] if attached else self.tools.focus
        self.tools.wanted = set(intent_paths(task))
        # Edits leave the test command's files alone unless the task names them (the 0.5B quotes
        # a test file it was shown back with a broken line), and may change a test it asks for.
        self.tools.protected = named_paths(self.config.test_cmd or "") - self.tools.wanted
        try:
            await rename_exactly(self, task, wants)  # a rename alone is done here, without the model
            while True:
                try:
                    await self.steps.run(self.step, self.budget, self.stats.budgeted_tokens)
                    retries = 0
                except OverBudget as exc:
                    if self.on_over_budget is None or not self.on_over_budget(exc.message):
                        raise
                    self.budget.fresh(self.stats.budgeted_tokens)
                except FormatError as exc:
                    retries += 1
                    self.emit.single("error", message=exc.message)
                    if retries > self.config.max_retries:
                        failed = f"the model's actions failed {retries} times in a row: {exc.message}"
                        raise Failed(failed) from None
        except Submitted as exc:
            status, message = "completed", exc.message
        except Cancelled:
            status, message = "cancelled", "cancelled by the user"
        except (Failed, ClientError, WriteFailed, ContextFull) as exc:
            status, message = "failed", exc.message
        status, message = self.progress.verdict(status, message, shown(self.config.test_cmd or ""))
        self._turn_start = None
        self.context.note_turn(changed=self.progress.changed)
        self.stats.duration_ms = (time.perf_counter() - started) * 1000
        if status == "completed":
            t.completed(usage=self.stats.usage(), timings=self.stats.timings())
        else:
            t.failed(message, usage=self.stats.usage())
        return TurnOutcome(t.id, status, message, self.stats, sorted(set(self.progress.changed)))

    # -- one step ------------------------------------------------------------------------------------

    async def step(self) -> list[str]:
        """Ask the model, then do what it asked; returns the files changed."""
        return await self.execute(await self.query())

    async def query(self) -> Reply:
        while self._steering:
            text = self._steering.popleft()
            self.tools.secrets.grant_named(text)
            self.items.append({"type": "message", "role": "user", "content": text})
            self.emit.single("user_message", text=text)
        if self.stats.model_calls >= self.config.max_steps:
            raise Failed(f"stopped after {self.config.max_steps} steps without finishing the task")
        try:
            return await self._ask()
        except ResponseError as exc:
            if exc.code != "context_length_exceeded":
                raise
            # The server counted more than the estimate: compact against its count and ask again once.
            self.context.overflowed(self.instructions, self.items, exc.message)
            await self.compact(force=True)
            return await self._ask()

    async def _ask(self) -> Reply:
        if await self.compact() is not None:
            self.retries.forget()  # the items were rewritten: a retry sees them as they are now
        tokens_left = self.budget.tokens_left(self.stats.budgeted_tokens)
        offered = await self.tools.offer(self.instructions, TOOLS if self.config.actions == "tools" else None)
        request = ModelRequest(
            offered[0],
            tools=offered[1],
            prediction=self._prediction or self.tools.prediction(),
            max_output_tokens=max(1, min(self.config.max_output_tokens, tokens_left)),
            task=self.progress.task,
            edited=bool(self.progress.changed),
            **vars(self.retries.request(self.items)),  # items, retry_from, temperature, hollow
        )
        self._prediction = None  # the first reply's: later ones follow what was said since
        reply, finished = await read_reply(self.model, request, self.emit, self.steps)
        self.retries.replied(len(self.items))
        self.items.extend(finished.output_items)
        self.stats.add_call(finished)
        self.context.observe(request, finished)
        if self.steps.cancelled or finished.status == "cancelled":
            raise Cancelled("cancelled")
        if finished.status == "failed":
            raise Failed(f"the model failed: {finished.error or 'no reason given'}")
        if finished.status == "incomplete":
            told, error = cut_off(finished, request.max_output_tokens)
            self.tell(told)
            raise FormatError(error)
        return reply

    # -- the context window --------------------------------------------------------------------------

    @property
    def context_window(self) -> int | None:
        """Tokens the model can hold: `config.context_tokens`, else what the model's server says."""
        return self.config.context_tokens or getattr(self.model, "context_window", None)

    def context_used(self) -> int:
        """Tokens the next request's input would take, estimated."""
        return self.context.estimate(self.instructions, self.items)

    async def compact(self, *, force: bool = False) -> Compacted | None:
        """Compact the conversation if the next request would not fit the window (always, with
        `force`: the UI's /compact); says so with a `context_compacted` item. None: nothing done
        (or no window known). Raises `ContextFull` when even compacted it cannot fit."""
        window = self.context_window
        if window is None or (force and not self.items):
            return None
        done = await self.context.fit(
            self.instructions,
            self.items,
            window_tokens=window,
            reply_tokens=self.config.max_output_tokens,
            turn_start=self._turn_start,
            summariser=unwrapped(self.model),
            force=force,
        )
        if done is None:
            return None
        if self._turn_start is not None:  # the running turn's items are kept, one for one
            self._turn_start = len(done.items) - (len(self.items) - self._turn_start)
        self.items[:] = done.items
        self.compactions += 1
        self.emit.single("context_compacted", **done.item())
        return done

    # -- acting on a reply ---------------------------------------------------------------------------

    async def execute(self, reply: Reply) -> list[str]:
        """Do what the reply asks, and see what came of it; returns the files changed."""
        text = self.retries.restore(reply.text)
        actions = self.parse(reply, text)
        if not actions:
            if self._steering:
                return []  # the user said more while it answered: go on with that
            return await self.answer(text)
        outcomes = []
        for index, (action, call_id) in enumerate(actions):
            if stop := stall_before(self.stall, action):
                return await end_stalled(self, stop, [i for _, i in actions[index:] if i], outcomes)
            outcomes.append(outcome := await self.tools.run(action))
            stall_after(self.stall, action, outcome)
            self.stats.count(action, outcome)
            if call_id is not None:
                self.items.append(
                    {"type": "function_call_output", "call_id": call_id, "output": outcome.text}
                )
        return await self.observe(text, actions, outcomes)

    def parse(self, reply: Reply, text: str) -> Actions:
        """The reply's actions (`text`: its text as meant), each with its tool call's id."""
        if self.config.actions == "tools":
            actions = [(tool_action(call), call.call_id) for call in reply.calls]
            self.stats.calls_started += len(actions) + unparsed_calls(reply.text)
            self.stats.calls_well_formed += sum(not isinstance(a, Malformed) for a, _ in actions)
            return actions
        if (echoed := self.retries.echoed(self.items, text, self.progress.still_to_change)) is not None:
            raise self._retry(*echoed)  # it wrote back its instructions or my message
        actions = [(action, None) for action in text_actions(text, self.tools.focus_text())]
        if not actions:
            # Code with no path, or no usable edit: the file the task names, or told what is missing.
            fallback = code_without_edit(text, self.progress.task, self.ws)
            actions = [(fallback, None)] if fallback is not None else []
        return actions

    async def observe(self, text: str, actions: Actions, outcomes: list[Outcome]) -> list[str]:
        """What the actions came to: feedback for the model, a retry, or the end of the turn."""
        unchanged = all(o.noop for o in outcomes)
        if unchanged and self.progress.still_to_change():  # the code written back is no answer
            quoted = [path for o in outcomes for path in o.quoted]
            await self.retries.written_back(self.items, quoted, self._turn_start, self._run_tests)
            told, error = self.retries.push_back("wrote the code back unchanged")
            raise self._retry(told if self.config.actions == "text" else None, error)
        if self.config.actions == "text":
            self.tell("\n\n".join(o.text for o in outcomes))
        self.stats.acting_replies += not any(o.malformed or o.noop for o in outcomes)
        self.retries.acted()
        if unchanged:
            return await self.answer(text)  # it only quoted a file: an answer, not an edit
        changed = [path for o in outcomes for path in o.changed]
        self.progress.changed += changed
        self.progress.untested = self.progress.untested or bool(changed)
        if any(o.malformed for o in outcomes):
            self.retries.malformed(text)
            raise FormatError("; ".join(o.text.splitlines()[0] for o in outcomes if o.malformed))
        self.retries.well_formed()
        checking = changed and self.config.check_edits and not self.progress.checked
        if checking and (problems := check_files(self.ws, changed)):
            # Once a turn: a second look would only loop on what the model cannot fix.
            self.progress.checked = True
            self.tell("Your edit left errors:\n" + "\n".join(problems) + "\nFix them.")
            return changed
        edits_only = all(isinstance(a, ApplyEdits) for a, _ in actions)
        if edits_only and all(o.ok for o in outcomes) and not self._steering:
            await self.finish_edits(changed)
        return changed

    async def _run_tests(self) -> Outcome:
        outcome = await self.tools.run_tests(self.config.test_cmd or "")
        self.progress.tests_fail = not outcome.ok
        return outcome

    async def finish_edits(self, changed: list[str], summary: str = "") -> None:
        """A reply that only edited, and all of it applied: done, once the tests (if set) pass."""
        summary = summary or f"edited {', '.join(dict.fromkeys(changed))}"
        if not self.config.test_cmd:
            raise Submitted(summary)
        outcome = await self._run_tests()
        self.progress.untested = False
        if outcome.ok:
            raise Submitted(summary + "; the tests pass")
        self.budget.tests_failed()
        self.tell(f"The tests failed:\n{outcome.text}\nFix the code so they pass.")

    async def answer(self, text: str) -> list[str]:
        """The model answered in words instead of acting: the turn ends with its answer, unless it
        edited since the tests last ran (the edit checks sent it back, say, and it explained
        instead of fixing). Then the tests decide, not its words: they run now, and if they fail
        it is told so and goes on, as after any failing edit."""
        if self.config.test_cmd and self.progress.untested:
            await self.finish_edits(self.progress.changed)
            return []
        if self.progress.tests_fail:
            # Words while the tests fail: the 0.5B often explains the failure, or blames the test,
            # and stops. Told so, it gets another try (a format retry: two at most) before the turn
            # ends on it. (Words before any change end the turn: a refusal is words too.)
            raise self._retry(*self.retries.push_back("made no edit"))
        raise Submitted(text.strip() or "done")

    def _retry(self, told: str | None, error: str) -> FormatError:
        """A format retry: the model is `told` what was wrong (None: a tool call's output said it)."""
        if told is not None:
            self.tell(told)
        return FormatError(error)

    def tell(self, text: str) -> None:
        """Feedback the model reads next step, as a user message."""
        self.items.append({"type": "message", "role": "user", "content": text})
