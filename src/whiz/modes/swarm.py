"""The swarm: a director plans micro-tasks, fast workers do them in parallel, results merge back.

1. The director (the deep model; the fast one in fast mode) writes a plan: small independent
   micro-tasks as validated JSON, each with its files and a check command (`swarm_plan.py`).
2. Up to K workers run at once. Each attempt is a fresh agent with the fast model in its own
   copy of the workspace, forked from one snapshot taken at the start, so every worker sees the
   same base. A task passes when its check exits 0 in its copy.
3. A failed task is retried (twice by default) with the previous failure's output, then handed
   to the deep model, which is a `mode_change` item like any escalation.
4. Each passing task merges into the workspace as it finishes, three-way against the snapshot
   (`merge.py`): conflicts are reported with the task's diff, and nothing is overwritten.
5. The final test command runs in the workspace.

Progress is a stream of items (`micro_task` started/updated/completed, `merge`), shown live in
the terminal (`show.SwarmProgress`) or as JSON Lines.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from whiz.agent.approvals import ApprovalMode
from whiz.agent.config import AgentConfig
from whiz.agent.editing.undo import UndoStore
from whiz.agent.events import Collector
from whiz.agent.loop import Agent
from whiz.agent.models.seam import Finished, ModelRequest, ModelText
from whiz.agent.project.workspace import Workspace
from whiz.agent.tools import run_reported
from whiz.environments import SandboxOptions, environment_for
from whiz.environments.local import CommandResult, truncate
from whiz.environments.worktree import IsolatedCopy, isolated_copy
from whiz.errors import WhizError
from whiz.modes.merge import Merger, MergeResult
from whiz.modes.notices import ItemEmitter
from whiz.modes.registry import Label
from whiz.modes.router import ModeRouter
from whiz.modes.swarm_plan import MicroTask, Plan, PlanError, director_messages, parse_plan
from whiz.modes.whole_files import WholeFileEdits


class SwarmError(WhizError):
    """The swarm could not start: no valid plan, or no copy of the workspace."""


@dataclass
class SwarmSettings:
    """How a swarm runs. Every field has the default `whiz swarm` uses."""

    workers: int = 3
    retries: int = 2
    """Fast attempts after the first before a task goes to the deep model."""
    max_steps: int = 8
    check_timeout_s: float = 120.0
    test_cmd: str | None = None
    """Run in the workspace at the end; the swarm is done when it passes."""
    director_retries: int = 2
    director_max_tokens: int = 1536
    sandbox: SandboxOptions = field(default_factory=SandboxOptions)
    """Where the workers' commands, the checks and the final tests may write and reach."""


@dataclass
class TaskRun:
    """How one micro-task went: its last attempt's result and the files it changed."""

    task: MicroTask
    passed: bool
    attempts: int
    mode: Label
    message: str
    check_output: str = ""
    changed: dict[str, str | None] = field(default_factory=dict)


@dataclass
class SwarmOutcome:
    plan: Plan
    runs: list[TaskRun]
    merges: list[MergeResult]
    final: CommandResult | None

    @property
    def conflicts(self) -> list[MergeResult]:
        return [m for m in self.merges if m.status == "conflict"]

    @property
    def ok(self) -> bool:
        all_passed = all(r.passed for r in self.runs)
        final_ok = self.final is None or self.final.ok
        return all_passed and not self.conflicts and final_ok

    def summary(self) -> dict[str, Any]:
        return {
            "tasks": len(self.plan.tasks),
            "passed": sum(r.passed for r in self.runs),
            "failed": [r.task.id for r in self.runs if not r.passed],
            "handed_to_deep": [r.task.id for r in self.runs if r.mode == Label.DEEP],
            "merged": [m.task_id for m in self.merges if m.status == "merged"],
            "conflicts": [m.task_id for m in self.conflicts],
            "tests_passed": None if self.final is None else self.final.ok,
        }


class Swarm:
    """One swarm over one workspace; `run(task)` is the whole turn, reported through `emit`."""

    def __init__(
        self,
        ws: Workspace,
        router: ModeRouter,
        emit: ItemEmitter,
        settings: SwarmSettings | None = None,
        *,
        undo: UndoStore | None = None,
        turn_id: str = "swarm",
    ):
        self.ws = ws
        self.router = router
        self.emit = emit
        self.settings = settings or SwarmSettings()
        self.undo = undo
        self.turn_id = turn_id

    @property
    def director_label(self) -> Label:
        return self.router.mode.director

    @property
    def worker_label(self) -> Label:
        return self.router.mode.first

    async def run(self, task: str, plan: Plan | None = None) -> SwarmOutcome:
        """Plan (unless given), work, merge, test. Raises `SwarmError` when there is no plan."""
        plan = plan or await self.direct(task)
        self.emit.single(
            "swarm_plan",
            tasks=[{"id": t.id, "title": t.title, "files": t.files, "check": t.check} for t in plan.tasks],
        )
        try:
            base = await asyncio.to_thread(
                isolated_copy,
                self.ws.root,
                prefix="whiz-swarm-base-",
                secrets=self.ws.secrets,
                keep_secrets=self.settings.sandbox.allow_secret_reads,
            )
        except WhizError as exc:
            raise SwarmError(f"could not snapshot the workspace: {exc.message}") from None
        merger = Merger(self.ws, base.read_text, self.undo, self.turn_id)
        limit = asyncio.Semaphore(max(1, self.settings.workers))
        runs: dict[str, TaskRun] = {}
        merges: list[MergeResult] = []

        async def one(micro: MicroTask) -> None:
            async with limit:
                run = await self.work(micro, base)
            runs[micro.id] = run
            if run.passed:
                result = merger.merge(micro.id, run.changed)
                merges.append(result)
                self.emit.single("merge", **result.item())

        try:
            await asyncio.gather(*(one(t) for t in plan.tasks))
        finally:
            await asyncio.to_thread(base.close)
        final = await self._final_tests() if self.settings.test_cmd else None
        return SwarmOutcome(plan, [runs[t.id] for t in plan.tasks], merges, final)

    async def direct(self, task: str) -> Plan:
        """Ask the director for a plan; invalid plans get feedback, up to `director_retries` times."""
        label = self.director_label
        instructions, first = director_messages(self.ws, task, self.settings.test_cmd)
        items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": first}]
        item = self.emit.start("agent_message", text="", role="director", mode=label)
        client = await self.router.pool.open_client(label)
        try:
            problem = ""
            for _ in range(1 + self.settings.director_retries):
                request = ModelRequest(
                    instructions, list(items), max_output_tokens=self.settings.director_max_tokens
                )
                text, finished = "", None
                async for event in client.respond(request):
                    if isinstance(event, ModelText):
                        text += event.text
                    elif isinstance(event, Finished):
                        finished = event
                if finished is None or finished.status == "failed":
                    why = finished.error if finished else "no reply"
                    raise SwarmError(f"the director ({label} model) failed: {why}")
                items += finished.output_items or [{"type": "message", "role": "assistant", "content": text}]
                try:
                    plan = parse_plan(text, self.ws)
                except PlanError as exc:
                    problem = exc.message
                    fix = f"{problem} Reply with only the corrected JSON plan."
                    items.append({"type": "message", "role": "user", "content": fix})
                    continue
                self.emit.complete(item, text=text)
                return plan
        finally:
            close = getattr(client, "close", None)
            if close is not None:
                await close()
        self.emit.complete(item, text=text)
        raise SwarmError(
            f"the director's plan was not valid after {1 + self.settings.director_retries} tries: {problem}"
        )

    async def work(self, micro: MicroTask, base: IsolatedCopy) -> TaskRun:
        """Attempts until the task's check passes: fast ones first, then (auto) one with deep."""
        first = self.worker_label
        labels: list[Label] = [first] * (1 + self.settings.retries)
        if first != Label.DEEP and self.router.mode.escalates("swarm_retry"):
            labels.append(Label.DEEP)
        item = self.emit.start(
            "micro_task", task_id=micro.id, title=micro.title, files=micro.files, check=micro.check,
            status="in_progress", attempt=1, mode=first, message="", check_output="",
        )  # fmt: skip
        run = TaskRun(micro, False, 0, first, "not started")
        for attempt, label in enumerate(labels, start=1):
            if label != run.mode:
                self.emit.single(
                    "mode_change", **{"from": run.mode, "to": label},
                    reason=f"micro-task {micro.id} failed {attempt - 1} times with the {run.mode} model "
                    f"({run.message[:120]})",
                    trigger="swarm_retry", task_id=micro.id,
                )  # fmt: skip
            self.emit.update(item, attempt=attempt, mode=label, status="in_progress")
            run = await self._attempt(micro, base, label, attempt, run if attempt > 1 else None)
            if run.passed:
                break
        self.emit.complete(
            item,
            status="passed" if run.passed else "failed",
            attempt=run.attempts,
            mode=run.mode,
            message=run.message,
            check_output=truncate(run.check_output, 2000),
            changed=sorted(run.changed),
        )
        return run

    async def _attempt(
        self, micro: MicroTask, base: IsolatedCopy, label: Label, attempt: int, previous: TaskRun | None
    ) -> TaskRun:
        s = self.settings
        try:
            copy = await asyncio.to_thread(isolated_copy, base.path, prefix="whiz-swarm-")
        except WhizError as exc:
            return TaskRun(micro, False, attempt, label, f"could not copy the workspace: {exc.message}")
        try:
            # The copy's files look like secrets as the workspace's do (the user's patterns too).
            copy_ws = Workspace(copy.path, self.ws.secrets)
            client = WholeFileEdits(await self.router.pool.open_client(label), copy_ws, micro.files)
            config = AgentConfig(
                approval=ApprovalMode.AUTO_EDIT,
                test_cmd=micro.check,
                max_steps=s.max_steps,
                command_timeout_s=s.check_timeout_s,
                sandbox=s.sandbox,
            )
            events = Collector()
            agent = Agent(client, copy_ws, config=config, sink=events)
            try:
                # The planner wrote the task: a secret file it names is not the user asking.
                result = await agent.run(worker_prompt(micro, previous), from_user=False)
            finally:
                await client.close()
            check = await environment_for(copy.path, s.sandbox, timeout_s=s.check_timeout_s).run(micro.check)
            # From the edits' own events: a turn's result can miss the step that finished it.
            paths = [
                c["path"]
                for item in events.items("file_change")
                if item.get("status") == "completed"
                for c in item.get("changes", [])
            ]
            changed = {path: copy.read_text(path) for path in dict.fromkeys(paths + result.changed)}
        except WhizError as exc:
            return TaskRun(micro, False, attempt, label, exc.message)
        finally:
            await asyncio.to_thread(copy.close)
        if check.ok:
            message = result.message if result.ok else f"the check passes ({result.message})"
        else:
            what = "timed out" if check.timed_out else f"exited with {check.exit_code}"
            message = f"the check `{micro.check}` {what}"
        return TaskRun(micro, check.ok, attempt, label, message, check.output, changed)

    async def _final_tests(self) -> CommandResult:
        command = self.settings.test_cmd or ""
        return await run_reported(
            self.emit, self.ws.root, command, self.settings.check_timeout_s, self.settings.sandbox
        )


def worker_prompt(micro: MicroTask, previous: TaskRun | None) -> str:
    """A worker's task: the instruction, its files, its check, and the last attempt's failure."""
    text = (
        f"{micro.instruction}\n\nChange only these files: {', '.join(micro.files)}.\n"
        f"The task is done when `{micro.check}` passes."
    )
    if previous is not None and previous.check_output:
        output = truncate(previous.check_output, 2500).rstrip()
        text += f"\n\nAn earlier attempt failed: {previous.message}. Its output:\n```\n{output}\n```"
    return text
