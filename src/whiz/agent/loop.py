"""The agent: `run(task)` loops `step()`, and a step is `execute(query())`.

Control flow uses exceptions that carry a message, caught in one place (`run`): `Submitted`
ends the turn done, `Failed` ends it with a reason, `Cancelled` when the user stopped it, and
`FormatError` (a malformed action) sends feedback and lets the model try again, twice at most.

The agent never prints: everything it does is an event for its sink (`events.py`). A UI drives
it with `run()` (a turn), `steer()` (a message delivered at the next step boundary) and `cancel()`
(stop now; the server stops generating too). Call them from the event loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from whiz.agent.approvals import ApprovalMode, Approvals
from whiz.agent.checks import check_files
from whiz.agent.compaction import Compacted, Context, ContextFull
from whiz.agent.config import AgentConfig
from whiz.agent.events import Emitter, EventSink
from whiz.agent.formats import TOOLS, ActionFormat, text_actions, tool_action, unparsed_calls
from whiz.agent.hollow import Hollow, hollow
from whiz.agent.intent import asks_for_change, code_without_edit
from whiz.agent.intent import named_paths as intent_paths
from whiz.agent.model import (
    Finished,
    ModelClient,
    ModelRequest,
    ModelText,
    ModelToolCall,
    WrappedModel,
    output_items,
)
from whiz.agent.prompt import echoes_instructions, repeats, system_prompt, task_message
from whiz.agent.repetition import looping
from whiz.agent.runs_check import shown
from whiz.agent.secret_files import SecretGate, redact
from whiz.agent.stats import TurnOutcome, TurnStats
from whiz.agent.test_files import named_paths
from whiz.agent.tools import ApplyEdits, Malformed, RunCommand, Toolbox, WriteFailed
from whiz.agent.turns import Turn, turn
from whiz.agent.undo import UndoStore
from whiz.agent.workspace import Workspace
from whiz.client import ClientError, ResponseError
from whiz.environments import Environment, environment_for

HOLLOW_AFTER = 2
"""Replies in a row that wrote the code back unchanged before the next request shows the
functions they wrote back without their bodies (`hollow.py`): one such retry shown the code
still gets an edit out of most of the turns that would otherwise end with none."""

RETRY_TEMPERATURE = 0.7
"""For the reply after one that owed an edit and wrote none (or the same code back): at the
session's temperature (0 by default) the same prompt gives nearly the same reply again. Healing
samples its candidates at this temperature too."""


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


@dataclass
class Reply:
    text: str
    calls: list[ModelToolCall]


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
        if self.config.actions is None:
            self.config.actions = "text"
        self.emit = Emitter(sink or (lambda event: None))
        self.approvals = approvals or Approvals(
            self.config.approval, preapproved=[self.config.test_cmd or ""]
        )
        secrets = SecretGate(workspace)
        # Commands hide the secret files the model may not see, by the workspace's own rules, and
        # show those the user let through (named, or a READ approved) from the next command on.
        sandbox = dataclasses.replace(self.config.sandbox, secret_files=workspace.secrets)
        self.env = environment or environment_for(
            workspace.root, sandbox, timeout_s=self.config.command_timeout_s, shown=secrets.granted
        )
        self.tools = Toolbox(
            workspace,
            self.env,
            self.approvals,
            self.emit,
            undo=undo,
            command_timeout_s=self.config.command_timeout_s,
            secrets=secrets,
        )
        self.items: list[dict[str, Any]] = items if items is not None else []
        self.instructions = instructions or self.default_instructions()
        self._steering: deque[str] = deque()
        self._cancelled = False
        self._running = False
        self._step: asyncio.Task | None = None
        self._cancelling: asyncio.Future | None = None
        self._in_model = False
        self._changed: list[str] = []
        self._task = ""
        self._deadline = 0.0
        self._tokens_before = 0
        self._test_failures = 0
        self.on_over_budget: Callable[[str], bool] | None = None
        """Called with the reason when the turn runs over its budget: True when a deeper model
        takes over (auto mode), and the turn goes on with a fresh budget; else the turn fails."""
        self._checked = False
        self._stuck_at: int | None = None
        """Where in `items` the replies that owed an edit and made none begin (None: the last
        reply was not one). The next request leaves them out and is sampled (`_request_items`)."""
        self._reply_at = 0
        self._written_back = 0
        """Replies in a row that wrote the code back unchanged (`HOLLOW_AFTER`)."""
        self._hollow: Hollow | None = None
        """The functions the next request shows without bodies, while replies write them back."""
        self._last_malformed: tuple[str, int] = ("", 0)
        """The last malformed reply of the turn and where it begins in `items`."""
        self._tests_fail = False
        self._failing_as_is: str | None = None
        """The tests' output on the code as it was, run once a turn when a reply wrote it back
        unchanged before any edit ("" where they passed; None: not run this turn)."""
        self._untested = False
        """Files changed since the tests last ran: with a test command, they run before an answer
        in words can end the turn."""
        self.stats = TurnStats()
        self.context = Context(test_cmd=self.config.test_cmd)
        """The context window's use, and what a compaction keeps (see `compaction.py`)."""
        self.compactions = 0
        """How many times `items` was rewritten by compaction (a store must then rewrite it too)."""
        self._turn_start: int | None = None

    def default_instructions(self) -> str:
        """The system prompt for the agent's config and approval mode as they are now (write it
        to `instructions` again after changing them)."""
        return system_prompt(
            self.ws,
            self.config.actions,
            read_only=self.approvals.mode is ApprovalMode.READ_ONLY,
            test_cmd=self.config.test_cmd,
            map_tokens=self.config.map_tokens,
        )

    def reconfigure(self, actions: ActionFormat, test_cmd: str | None) -> None:
        """Act in `actions` and test with `test_cmd` (None: no tests) from the next turn on: the
        test command becomes the pre-approved one, and the instructions say so."""
        if self.config.test_cmd:
            self.approvals.preapproved.discard(self.config.test_cmd.strip())
        if test_cmd and test_cmd.strip():
            self.approvals.preapproved.add(test_cmd.strip())
        self.config.actions = actions
        self.config.test_cmd = test_cmd
        self.context.test_cmd = test_cmd
        self.instructions = self.default_instructions()

    # -- driving the agent -------------------------------------------------------------------------

    def steer(self, text: str) -> None:
        """Queue a message from the user; the model reads it before its next step."""
        if text.strip():
            self._steering.append(text.strip())

    def cancel(self) -> None:
        """Stop the turn now. A model call is cancelled on the server; a command is killed."""
        if not self._running or self._cancelled:
            return
        self._cancelled = True  # between steps, the loop sees this before the next one
        step = self._step
        if step is None or step.done():
            return
        if self._in_model:
            # Let the server end the response (its partial reply stays in the conversation, and
            # the next call can chain from it); cut it off if it takes longer than the grace.
            self._cancelling = asyncio.ensure_future(self._cancel_model())
            asyncio.get_running_loop().call_later(self.config.cancel_grace_s, step.cancel)
        else:
            step.cancel()

    async def _cancel_model(self) -> None:
        with contextlib.suppress(ClientError):  # the connection is gone: nothing left to stop
            await self.model.cancel()

    async def run(self, task: str, *, from_user: bool = True) -> TurnOutcome:
        """One turn: the task, then steps until it is done, fails or is cancelled. A task not
        `from_user` (a swarm's planner wrote it) lets the model see no secret-looking file it
        names, and has any such file's values masked."""
        if self._running:
            raise RuntimeError("a turn is already running; steer() or cancel() it")
        self._running = True
        try:
            return await self._turn(task, from_user)
        finally:
            self._running, self._step = False, None

    async def _turn(self, task: str, from_user: bool = True) -> TurnOutcome:
        with turn(self.emit) as t:
            return await self._turn_body(t, task, from_user)

    async def _turn_body(self, t: Turn, task: str, from_user: bool = True) -> TurnOutcome:
        turn_id = t.id
        self.stats, self._cancelled, self._changed, retries = TurnStats(), False, [], 0
        started = time.perf_counter()
        self.tools.begin_turn(turn_id)
        self._task, self._checked, self._tests_fail, self._untested = task, False, False, False
        self._stuck_at, self._last_malformed, self._failing_as_is = None, ("", 0), None
        self._unstuck()
        self._fresh_budget()
        first = not any(i.get("role") == "user" for i in self.items)
        if from_user:
            self.tools.secrets.grant_named(task)  # the user asked for that file by name
        text, attached = task_message(
            self.ws, task, code_tokens=self.config.code_tokens, first=first, named_secrets=from_user
        )
        # A task not from the user gets every withheld value masked; any task, private keys.
        text = self.tools.secrets.redact(text) if not from_user else redact(text, set())
        self._turn_start = len(self.items)
        self.context.note_turn(task)
        self.items.append({"type": "message", "role": "user", "content": text})
        if attached:
            self.tools.focus = attached[-1]
        self.tools.wanted = set(intent_paths(task))
        self.tools.protected = self._deciding_tests(self.tools.wanted)
        try:
            while True:
                try:
                    await self._run_step()
                    retries = 0
                except OverBudget as exc:
                    if self.on_over_budget is None or not self.on_over_budget(exc.message):
                        raise
                    self._fresh_budget()
                except FormatError as exc:
                    retries += 1
                    self.emit.single("error", message=exc.message)
                    if retries > self.config.max_retries:
                        raise Failed(
                            f"the model's actions failed {retries} times in a row: {exc.message}"
                        ) from None
        except Submitted as exc:
            status, message = "completed", exc.message
        except Failed as exc:
            status, message = "failed", exc.message
        except Cancelled:
            status, message = "cancelled", "cancelled by the user"
        except (ClientError, WriteFailed, ContextFull) as exc:
            status, message = "failed", exc.message
        if status == "completed" and not self._changed and self._wants_change(task):
            status, message = "failed", f"the task asked for a change, but none was made: {message[:300]}"
        elif status == "completed" and self._tests_fail:  # it gave up on failing tests, in words
            status, message = (
                "failed",
                f"the tests (`{shown(self.config.test_cmd or '')}`) still fail: {message[:300]}",
            )
        self._turn_start = None
        self.context.note_turn(changed=self._changed)
        self.stats.duration_ms = (time.perf_counter() - started) * 1000
        if status == "completed":
            t.completed(usage=self.stats.usage(), timings=self.stats.timings())
        else:
            t.failed(message, usage=self.stats.usage())
        return TurnOutcome(turn_id, status, message, self.stats, sorted(set(self._changed)))

    def _fresh_budget(self) -> None:
        self._deadline = time.perf_counter() + self.config.max_turn_s
        self._tokens_before = self.stats.output_tokens
        self._test_failures = 0

    def _tokens_left(self) -> int:
        return self.config.max_turn_output_tokens - (self.stats.output_tokens - self._tokens_before)

    async def _run_step(self) -> None:
        if self._cancelled:
            raise Cancelled("cancelled")
        if self._tokens_left() <= 0:
            raise OverBudget(
                f"stopped: the turn used its {self.config.max_turn_output_tokens} output tokens "
                "without finishing the task"
            )
        self._step = asyncio.ensure_future(self.step())
        try:
            done, _ = await asyncio.wait({self._step}, timeout=max(0.0, self._deadline - time.perf_counter()))
        except asyncio.CancelledError:
            self._step.cancel()  # the caller's own cancellation reaches the step
            raise
        if not done:
            await self._stop_step()
            raise OverBudget(f"stopped: the turn ran past its time limit of {self.config.max_turn_s:g} s")
        try:
            await self._step
        except asyncio.CancelledError:
            if not self._cancelled:
                raise  # the caller's own cancellation
            raise Cancelled("cancelled") from None

    async def _stop_step(self) -> None:
        """Stop a step that ran out of time: the server stops generating, a command is killed."""
        step = self._step
        if self._in_model:
            with contextlib.suppress(ClientError, asyncio.TimeoutError):
                await asyncio.wait_for(self._cancel_model(), self.config.cancel_grace_s)
        step.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await step

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
            self._stuck_at = None  # the items were rewritten: a retry sees them as they are now
            self._unstuck()
        request = ModelRequest(
            self.instructions,
            self._request_items(),
            tools=TOOLS if self.config.actions == "tools" else None,
            prediction=self.tools.prediction(),
            max_output_tokens=max(1, min(self.config.max_output_tokens, self._tokens_left())),
            temperature=None if self._stuck_at is None else RETRY_TEMPERATURE,
            task=self._task,
            retry_from=self._retry_items(),
            edited=bool(self._changed),
            hollow=self._hollow,
        )
        text, calls, finished, item = "", [], Finished("failed", error="no reply"), None
        looped: int | None = None
        self._in_model = True
        try:
            async for event in self.model.respond(request):
                if isinstance(event, ModelText) and event.text:
                    if item is None:
                        item = self.emit.start("agent_message", text="")
                    text += event.text
                    item["text"] = text
                    self.emit.emit("item.updated", item=dict(item), delta=event.text)
                    if looped is None and (looped := looping(text, event.text)) is not None:
                        await self._cancel_model()  # the rest would be the loop, to the output limit
                elif isinstance(event, ModelToolCall):
                    calls.append(event)
                elif isinstance(event, Finished):
                    finished = event
            if looped is not None and not self._cancelled:
                text = text[:looped]
                finished.status, finished.output_items = "completed", output_items(text, calls)
                self.emit.single("error", message="the reply went into a loop, the same lines over and over: "
                                 "it was stopped there, and what came before is kept")  # fmt: skip
        finally:
            self._in_model = False
            if item is not None:
                self.emit.complete(item, text=text, whiz=finished.timings)
        self._reply_at = len(self.items)
        self.items.extend(finished.output_items)
        self.stats.add_call(finished)
        self.context.observe(request, finished)
        if self._cancelled or finished.status == "cancelled":
            raise Cancelled("cancelled")
        if finished.status == "failed":
            raise Failed(f"the model failed: {finished.error or 'no reason given'}")
        if finished.status == "incomplete":
            if cut_by_window(finished, request.max_output_tokens):
                # Not the model's fault: the next step compacts (the count now says it is full).
                self._tell("Your reply was cut off: the conversation filled the context window. Go on.")
                raise FormatError("the reply was cut off at the end of the context window")
            self._tell("Your reply was cut off because it was too long. Make smaller edits.")
            raise FormatError("the reply was cut off at the output limit")
        return Reply(text, calls)

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

    async def execute(self, reply: Reply) -> list[str]:
        text = reply.text if self._hollow is None else self._hollow.restore(reply.text)
        if self.config.actions == "tools":
            actions = [(tool_action(call), call.call_id) for call in reply.calls]
            self.stats.calls_started += len(actions) + unparsed_calls(reply.text)
            self.stats.calls_well_formed += sum(not isinstance(a, Malformed) for a, _ in actions)
        elif (echo := self._echo(text)) is not None:
            # The instructions' READ, LIST and GREP lines are examples: acting on them only adds
            # noise, and a message written back is no answer. Told so, and asked again without the
            # echo in view (it would copy it), sampled.
            owed = (
                self._still_to_change_feedback()
                if self._still_to_change()
                else f"The task: {self._task.strip()[:300]}"
            )
            self._tell(f"Your last reply wrote {echo} back instead of acting on it. {owed}")
            self._stuck()
            raise FormatError(f"the reply wrote {echo} back")
        else:
            actions = [(action, None) for action in text_actions(text, self.tools.focus_text())]
        if not actions and self.config.actions == "text":
            # Code with no path, or no usable edit: the file the task names, or told what is missing.
            fallback = code_without_edit(text, self._task, self.ws)
            actions = [(fallback, None)] if fallback is not None else []
        if not actions:
            if self._steering:
                return []  # the user said more while it answered: go on with that
            return await self._answer(text)
        outcomes = []
        for action, call_id in actions:
            outcome = await self.tools.run(action)
            self.stats.count(action, outcome)
            outcomes.append(outcome)
            if call_id is not None:
                self.items.append(
                    {"type": "function_call_output", "call_id": call_id, "output": outcome.text}
                )
        unchanged = all(o.noop for o in outcomes)
        push_back = unchanged and self._still_to_change()
        if push_back:
            await self._test_as_is()
            self._wrote_back([path for o in outcomes for path in o.quoted])
        if self.config.actions == "text":
            told = "\n\n".join(o.text for o in outcomes)
            if push_back:  # said whole: the next request shows this feedback, not the reply
                told = f"Your last reply wrote the code back unchanged. {self._still_to_change_feedback()}"
            self._tell(told)
        self.stats.acting_replies += not any(o.malformed or o.noop for o in outcomes)
        if push_back:
            self._stuck()
            raise FormatError(f"the reply wrote the code back unchanged, {self._still_owed()}")
        self._stuck_at = None
        self._unstuck()
        if unchanged:
            return await self._answer(text)  # it only quoted a file: an answer, not an edit
        changed = [path for o in outcomes for path in o.changed]
        self._changed += changed
        self._untested = self._untested or bool(changed)
        if any(o.malformed for o in outcomes):
            if text.strip() == self._last_malformed[0]:
                # Word for word the reply it was just told was wrong: at the session's temperature
                # the next one would be the same again, so the retry is sampled without the two.
                self._stuck_at = self._last_malformed[1]
            self._last_malformed = (text.strip(), self._reply_at)
            raise FormatError("; ".join(o.text.splitlines()[0] for o in outcomes if o.malformed))
        self._last_malformed = ("", 0)
        checking = changed and self.config.check_edits and not self._checked
        if checking and (problems := check_files(self.ws, changed)):
            # Once a turn: a second look would only loop on what the model cannot fix.
            self._checked = True
            self._tell("Your edit left errors:\n" + "\n".join(problems) + "\nFix them.")
            return changed
        edits_only = all(isinstance(a, ApplyEdits) for a, _ in actions)
        if edits_only and all(o.ok for o in outcomes) and not self._steering:
            await self._finish_edits(changed)
        return changed

    async def _test_as_is(self) -> None:
        """Run the tests on code a reply wrote back unchanged before this turn's first edit (once
        a turn): where they fail, their output goes back with the push-back and into every retry
        (`_still_to_change_feedback`, `_retry_items`). The model took the code for done: the 0.5B
        wrote a function back unchanged six times, sampled too, told only that the task asks for
        a change; the failing assertion is the one thing that says what is still wrong."""
        if not self.config.test_cmd or self._changed or self._tests_fail or self._failing_as_is is not None:
            return
        outcome = await self.tools.run(RunCommand(self.config.test_cmd))
        self._tests_fail = not outcome.ok
        self._failing_as_is = "" if outcome.ok else outcome.text

    def _retry_items(self) -> list[dict[str, Any]] | None:
        """`ModelRequest.retry_from`: the conversation before the replies that owed an edit, with
        what the tests said about the code as it is added to the message they answered (a redraw
        from the task alone wrote the same code back again)."""
        if self._stuck_at is None:
            return None
        items = self.items[: self._stuck_at]
        asked = items[-1] if items else {}
        told = asked.get("role") == "user" and isinstance(asked.get("content"), str)
        if not self._failing_as_is or not told:
            return self._hidden(items)
        note = f"The tests fail on the code as it is now:\n{self._failing_as_is}\n"
        note += "Change the code so that they pass." + self._hollow_note()
        return self._hidden([*items[:-1], {**asked, "content": f"{asked['content']}\n\n{note}"}])

    def _echo(self, text: str) -> str | None:
        """What a reply only writes back instead of acting: the instructions (their examples), or
        the message it answers; None for a reply of its own."""
        if echoes_instructions(text):
            return "the instructions"
        asked = self.items[self._reply_at - 1] if self._reply_at > 0 else {}
        message = asked.get("content")
        if asked.get("role") == "user" and isinstance(message, str) and repeats(text, message):
            return "my last message"
        return None

    async def _finish_edits(self, changed: list[str]) -> None:
        """A reply that only edited, and all of it applied: done, once the tests (if set) pass."""
        summary = f"edited {', '.join(dict.fromkeys(changed))}"
        if not self.config.test_cmd:
            raise Submitted(summary)
        outcome = await self.tools.run(RunCommand(self.config.test_cmd))
        self._tests_fail, self._untested = not outcome.ok, False
        if outcome.ok:
            raise Submitted(summary + "; the tests pass")
        self._test_failures += 1
        if self._test_failures >= self.config.max_test_failures:
            raise OverBudget(
                f"stopped: the tests (`{shown(self.config.test_cmd)}`) failed after {self._test_failures} "
                "edits in this turn; the last edit is kept (`whiz undo` takes the turn back)"
            )
        self._tell(f"The tests failed:\n{outcome.text}\nFix the code so they pass.")

    async def _answer(self, text: str) -> list[str]:
        """The model answered in words instead of acting: the turn ends with its answer, unless it
        edited since the tests last ran (the edit checks sent it back, say, and it explained
        instead of fixing). Then the tests decide, not its words: they run now, and if they fail
        it is told so and goes on, as after any failing edit."""
        if self.config.test_cmd and self._untested:
            await self._finish_edits(self._changed)
            return []
        if self._tests_fail:
            # Words while the tests fail: the 0.5B often explains the failure, or blames the test,
            # and stops. Told so, it gets another try (a format retry: two at most) before the turn
            # ends on it. (Words before any change end the turn: a refusal is words too.)
            self._tell(f"Your last reply made no edit. {self._still_to_change_feedback()}")
            self._stuck()
            raise FormatError(f"the reply made no edit, {self._still_owed()}")
        raise Submitted(text.strip() or "done")

    def _deciding_tests(self, named_by_task: set[str]) -> set[str]:
        """The test files this turn's edits leave alone: those the test command names, unless the
        task names them too (a task may ask to change a test). The 0.5B quotes a test file it was
        shown back with a broken line, and the turn used to end on it."""
        if not self.config.test_cmd:
            return set()
        return named_paths(self.config.test_cmd) - named_by_task

    def _still_to_change(self) -> bool:
        """Whether code written back unchanged leaves the turn undone: the tests fail on that code,
        or the task asked for a change and none is made yet. Taking it for an answer ended some
        fast-mode turns with no edit (and others on the failing code); told so, the model gets
        another try (a format retry: two at most)."""
        return self._tests_fail or (not self._changed and self._wants_change(self._task))

    def _stuck(self) -> None:
        if self._stuck_at is None:
            self._stuck_at = self._reply_at

    def _unstuck(self) -> None:
        self._written_back, self._hollow = 0, None

    def _wrote_back(self, paths: list[str]) -> None:
        """A reply wrote `paths` back unchanged: from the `HOLLOW_AFTER`th in a row, the requests
        show their functions (those the task or the tests' output name) without bodies."""
        self._written_back += 1
        if self._written_back < HOLLOW_AFTER or self.config.actions != "text":
            return  # a tool call's old_text must be copied from the file: it needs the bodies
        # The task as written and the feedback since (the tests' output), not the code attached
        # to the task, which names every function in it.
        said = [self._task, self._failing_as_is or ""]
        since = self.items[(self._turn_start or 0) + 1 :]
        said += [i["content"] for i in since if i.get("role") == "user" and isinstance(i.get("content"), str)]
        self._hollow = hollow(self.ws, paths, said, self.config.test_cmd or "") or self._hollow

    def _hidden(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return items if self._hollow is None else self._hollow.items(items)

    def _hollow_note(self) -> str:
        if self._hollow is None:
            return ""
        names = ", ".join(f"`{n}`" for n in self._hollow.names[:6])
        if len(self._hollow.names) == 1:
            return f" The body of {names} is left out above: write that function anew."
        return f" The bodies of {names} are left out above: write those functions anew."

    def _request_items(self) -> list[dict[str, Any]]:
        """The conversation for the next request: a snapshot (adapters may keep it). After replies
        that owed an edit and made none, those replies are left out and the latest feedback is
        added to the message they answered: a small model copies a reply it can see (the 0.5B
        wrote the same file back three times, token for token, even sampled at 0.7), and two user
        messages in a row set it echoing its instructions. `items` itself keeps everything."""
        at = self._stuck_at
        if at is None or at == 0 or self.items[at - 1].get("role") != "user":
            return self._hidden(list(self.items))
        asked, feedback = self.items[at - 1], self.items[-1]
        if not isinstance(asked.get("content"), str) or not isinstance(feedback.get("content"), str):
            return self._hidden(list(self.items))
        merged = {**asked, "content": f"{asked['content']}\n\n{feedback['content']}"}
        return self._hidden([*self.items[: at - 1], merged])

    def _still_owed(self) -> str:
        if self._tests_fail:
            return f"and the tests (`{shown(self.config.test_cmd or '')}`) still fail"
        return "and the task asked for a change"

    def _still_to_change_feedback(self) -> str:
        if self._tests_fail and self._failing_as_is and not self._changed:
            # Each time: the merged retry shows only the latest feedback (`_request_items`).
            told = f"It is the code the tests failed on:\n{self._failing_as_is}\nChange it so that they pass."
        elif self._tests_fail:
            told = "It is the code the tests failed on: change it so that they pass."
        else:
            told = f"The task asks for a change, and none is made yet: {self._task.strip()[:300]}"
        return told + self._hollow_note()

    def _wants_change(self, task: str) -> bool:
        """Whether a turn that changed nothing failed: the task asked for a change (`intent.py`)
        in a session that may make one."""
        read_only = self.approvals.mode is ApprovalMode.READ_ONLY
        return self.config.require_change and not read_only and asks_for_change(task)

    def _tell(self, text: str) -> None:
        """Feedback the model reads next step, as a user message."""
        self.items.append({"type": "message", "role": "user", "content": text})


def cut_by_window(finished: Finished, max_output_tokens: int | None) -> bool:
    """Whether an incomplete reply ended at the context window rather than at `max_output_tokens`:
    the server cuts the reply at the window's end, before the limit asked for."""
    written = finished.usage.get("output_tokens")
    if written is None:
        written = finished.timings.get("decode_tokens")
    return bool(max_output_tokens) and written is not None and written < max_output_tokens


def unwrapped(model: ModelClient) -> ModelClient:
    """The plain model under wrappers (healing, whole-file answers): what a summary is asked of."""
    while isinstance(model, WrappedModel):
        model = model.inner
    return model
