"""Ending a turn whose tool calls stopped making progress (`stalls.ToolStall` says when): the calls
not made are answered as such, the event stream says why, and the model is asked once for its
answer in words from the results already in; where its words leave the useful result out, the
result is added. No result at all: the turn fails, saying why.

Every tool call is judged, the agent's own and the external ones: `called` names an action as the
policy sees it (the tool's name and its arguments, as the model was offered them), and an edit
that changed files tells the policy so (`stall_after`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from whiz.agent.formats import TOOLS, text_actions
from whiz.agent.models.seam import ModelRequest
from whiz.agent.reply import read_reply
from whiz.agent.signals import Cancelled, Failed
from whiz.agent.stalls import Stop, ToolStall
from whiz.agent.tools import (
    Action,
    ApplyEdits,
    CallTool,
    ListFiles,
    Outcome,
    ReadFile,
    RunCommand,
    SearchText,
)

if TYPE_CHECKING:
    from whiz.agent.config import AgentConfig
    from whiz.agent.context.compaction import Context
    from whiz.agent.control import Budget, Steps
    from whiz.agent.events import Emitter
    from whiz.agent.models.seam import ModelClient
    from whiz.agent.project.workspace import Workspace
    from whiz.agent.stats import TurnStats
    from whiz.agent.tools import Toolbox
    from whiz.agent.turns import Progress


class TurnAgent(Protocol):
    """The agent as a stalled turn's end sees it (`loop.Agent`): the parts it reads, and the two
    ways a turn goes on in words: the model is told something, or the turn ends with an answer."""

    ws: Workspace
    tools: Toolbox
    config: AgentConfig
    model: ModelClient
    instructions: str
    items: list[dict[str, Any]]
    emit: Emitter
    stall: ToolStall
    budget: Budget
    stats: TurnStats
    context: Context
    progress: Progress
    steps: Steps

    def tell(self, text: str) -> None:
        """Feedback the model reads next step."""
        ...

    async def answer(self, text: str) -> list[str]:
        """The model answered in words: the turn ends with `text`, unless the tests decide."""
        ...


LAST_WORDS_TOKENS = 400
"""The most the reply after `Stop.told` may write: an answer from results already in."""

KNOWN_FILES = 2000
"""The most workspace paths the policy takes as values the model was given (a listing shows 300)."""


async def new_stall(agent: TurnAgent, task: str, message: str) -> ToolStall:
    """The turn's policy: the task, and as what the model was told of where it works, the
    workspace's path, its files and the task's message (the files it attached, quoted)."""
    files = "\n".join(agent.ws.list_files(".", limit=KNOWN_FILES))
    where = f"{agent.ws.root}\n{files}\n{message}"
    return ToolStall(task, await agent.tools.external_names(), where)


def called(action: Action) -> tuple[str, dict[str, Any]] | None:
    """The tool and arguments a call names, for `ToolStall` (None: an edit, or malformed). An
    external tool's words after its name are one value."""
    match action:
        case CallTool():
            return action.name, action.arguments if action.plain is None else {"": action.plain}
        case ReadFile():
            lines = {"start_line": action.start, "end_line": action.end}
            return "read_file", {"path": action.path, **{k: v for k, v in lines.items() if v is not None}}
        case ListFiles():
            return "list_files", {"path": action.path}
        case SearchText():
            return "search_text", {"text": action.pattern, "path": action.path}
        case RunCommand():
            return "run_command", {"command": action.command}
    return None


def stall_before(stall: ToolStall, action: Action) -> Stop | None:
    """Whether the turn ends before `action` runs: only tool calls are judged."""
    return stall.before(*call) if (call := called(action)) is not None else None


def stall_after(stall: ToolStall, action: Action, outcome: Outcome) -> None:
    """Tell the policy what a tool call returned (an external one without the tool's name it is
    prefixed with), or which files an edit changed."""
    if isinstance(action, ApplyEdits) and outcome.changed:
        stall.changed(outcome.changed)
    elif (call := called(action)) is not None:
        result = outcome.text
        if isinstance(action, CallTool):
            result = result.removeprefix(f"{action.name}:\n")
        stall.after(*call, ok=outcome.ok, text=result, malformed=outcome.malformed)


async def end_stalled(agent: TurnAgent, stop: Stop, not_called: list[str], done: list[Outcome]) -> list[str]:
    """The turn's tool calls stopped making progress (`ToolStall`): it ends here, with the best
    answer there is. Calls of the reply not made are answered as such (every call needs an
    output in the conversation); in text actions, what those made before it came to is told."""
    if agent.config.actions == "text" and done:
        agent.tell("\n\n".join(o.text for o in done))
    for call_id in not_called:
        agent.items.append(
            {"type": "function_call_output", "call_id": call_id, "output": f"Not called: {stop.reason}"}
        )
    agent.emit.single("tool_stall", **stop.item())
    if not stop.results:
        raise Failed(f"the tool calls made no progress toward the task: {stop.reason}")
    agent.tell(stop.told())
    words = await last_words(agent)
    answer = agent.stall.answer(words)
    if answer != words.strip():  # the result the words leave out, shown as part of the answer
        added = answer.removeprefix(words.strip()).strip()
        item = agent.emit.start("agent_message", text="")  # streamed as a reply is, so views show it
        agent.emit.emit("item.updated", item={**item, "text": added}, delta=added)
        agent.emit.complete(item, text=added)
        agent.items.append({"type": "message", "role": "assistant", "content": added})
    return await agent.answer(answer)


async def last_words(agent: TurnAgent) -> str:
    """The model's answer in words ("" when it gives none, or calls a tool again). It is offered
    what it was before, tools and all, so the server reuses the conversation's cached prefix
    (a request without them is a new prompt, read again from the start); a call is not made."""
    offered = await agent.tools.offer(agent.instructions, TOOLS if agent.config.actions == "tools" else None)
    tokens_left = agent.budget.tokens_left(agent.stats.budgeted_tokens)
    request = ModelRequest(
        offered[0], list(agent.items), tools=offered[1], task=agent.progress.task,
        max_output_tokens=max(1, min(agent.config.max_output_tokens, LAST_WORDS_TOKENS, tokens_left)),
    )  # fmt: skip
    reply, finished = await read_reply(agent.model, request, agent.emit, agent.steps)
    agent.items.extend(finished.output_items)
    agent.stats.add_call(finished)
    agent.context.observe(request, finished)
    if agent.steps.cancelled or finished.status == "cancelled":
        raise Cancelled("cancelled")
    for call in reply.calls:
        not_made = "Not called: the turn's tool calls have ended."
        agent.items.append({"type": "function_call_output", "call_id": call.call_id, "output": not_made})
    acted = reply.calls or (agent.config.actions == "text" and text_actions(reply.text))
    return "" if finished.status == "failed" or acted else reply.text
