"""`ToolStall`: the policy that ends a turn whose tool calls stopped making progress toward the task.

A small model that has what the task asked for often goes on calling tools: the 0.5B, asked to
echo a message with an MCP server's `echo` tool, got the echo back and then called one unrelated
tool of the server after another to the turn's time limit; it also reads the same file again and
again, or searches for words nothing gave it. Every tool call the agent makes is judged here: the
agent's own tools (`OWN_TOOLS`: read_file, list_files, search_text, run_command) and the external
(MCP) ones, in text actions and in tool actions alike. The loop asks this policy before each call
whether it may run (`before`), tells it what the call came to (`after`), and tells it when an edit
changed files (`changed`).

A call makes progress when it is new and on task. New: not the same tool with the same arguments
again while nothing has changed since it ran, and not a call that returns what the same call
returned before (a re-read after an edit is new where the file changed; an edit or a command
that printed something new may have changed anything, so calls made before it may run again and
are judged by what they return). On task: its tool is one the task names and that has not
answered yet, or its arguments come from the task, what the model was told of where it works
(the workspace's path and files) or an earlier result (a value the model made up, or read off a
tool's description, comes from none of them). A command is the model's own writing, so it is
judged by the first test only. A result nobody uses counts for nothing.

Calls that make no progress are let through `patience` in a row (a model may need one look
around); the next one ends the turn before it runs. Once every tool the task names has answered,
there is no patience left, and another tool is on task only to use what came back. The turn then
ends with the best answer there is (`answer`): the model's words, asked for once more, with the
last useful result added where they leave it out. A stop with no useful result at all ends the
turn failed, saying why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

_WORD = re.compile(r"[a-z0-9]+")

OWN_TOOLS = ("read_file", "list_files", "search_text", "run_command")
"""The agent's own tools that are judged (edits are the work itself: they reset, see `changed`)."""

COMMANDS = frozenset({"run_command"})
"""Tools whose call may change what any call returns, and whose arguments the model writes."""

TOLD_CHARS = 2000
"""How much of the last useful result the model is shown again before its answer, and the answer
carries where the model's words leave it out."""


@dataclass(frozen=True)
class Used:
    """A call that made progress and worked: what the final answer is drawn from."""

    tool: str
    arguments: dict[str, Any]
    text: str


@dataclass(frozen=True)
class Stop:
    """Why the turn's tool calls end here, and what the turn has to answer with."""

    reason: str
    """For people: the call not made, and why."""
    tool: str
    arguments: dict[str, Any]
    results: tuple[Used, ...]
    """The useful results so far, oldest first (empty: nothing to answer with)."""

    def told(self) -> str:
        """What the model reads before its last reply: the calls are over, and what the last useful
        one returned (the 0.5B told only "answer with what the tools returned" wrote of a file it
        never read; it copies a result put in front of it)."""
        last = self.results[-1]
        text = _bounded(last.text)
        return (
            f"No more tools will be called in this turn. {last.tool} returned:\n{text}\n\n"
            "Answer the task now, in words, with what the tools returned."
        )

    def item(self) -> dict[str, Any]:
        """The `tool_stall` item's fields."""
        return {
            "reason": self.reason,
            "tool": self.tool,
            "arguments": self.arguments,
            "answered_from": [u.tool for u in self.results],
        }


@dataclass
class ToolStall:
    """One turn's tool calls, judged for progress. `tools`: the external tools on offer (the
    agent's own, `OWN_TOOLS`, always are)."""

    task: str
    tools: Iterable[str]
    where: str = ""
    """What the model was told of where it works (the workspace's path and files): values may
    come from it."""
    patience: int = 1
    """Calls in a row that make no progress let through before the next one ends the turn (none,
    once every tool the task names has answered)."""
    asked: set[str] = field(init=False)
    """The offered external tools the task names: in full, or by the tool's own name as a word."""
    answered: set[str] = field(default_factory=set, init=False)
    useful: list[Used] = field(default_factory=list, init=False)
    idle: int = field(default=0, init=False)
    """Calls in a row that made no progress."""
    _known: set[str] = field(default_factory=set, init=False)
    """Words of the task, of `where`, of the useful calls' arguments and of every result."""
    _results: dict[str, str] = field(default_factory=dict, init=False)
    """What each call (tool and arguments) returned the last time it ran."""
    _fresh: set[str] = field(default_factory=set, init=False)
    """The calls whose last result nothing has changed since: the same call again is a repeat."""
    _pending: dict[str, str | None] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.tools = set(self.tools) | set(OWN_TOOLS)
        # Not the agent's own: a task naming `fs__read_file` (or "fix read_file") asks for no read.
        self.asked = {name for name in self.tools - set(OWN_TOOLS) if _names(self.task, name)}
        self._known = _words(self.task) | _words(self.where)

    def before(self, tool: str, arguments: dict[str, Any]) -> Stop | None:
        """Whether the call may run: None, or the `Stop` that ends the turn instead."""
        if tool not in self.tools:
            return None  # not on offer: the toolbox says so, as a malformed action
        key = _key(tool, arguments)
        why = self._no_progress(tool, arguments, key)
        self._pending[key] = why
        if why is None or self.idle < (0 if self._asked_done() else self.patience):
            return None
        return Stop(f"{tool} was not called: {why}", tool, arguments, tuple(self.useful))

    def after(
        self, tool: str, arguments: dict[str, Any], *, ok: bool, text: str, malformed: bool = False
    ) -> None:
        """What a call let through came to. A malformed one (arguments that break the schema)
        counts for nothing: the format retries deal with it."""
        key = _key(tool, arguments)
        if tool not in self.tools or key not in self._pending or malformed:
            return
        why = self._pending.pop(key)
        if why is None and self._results.get(key) == text:
            why = "it returned what the same call returned before"
        elif tool in COMMANDS:
            self._fresh.clear()  # it may have changed files: what ran before may return otherwise
        self._results[key] = text
        self._fresh.add(key)
        if ok:  # a later call that uses a result shows it was of use
            self._known |= _words(text)
        if why is not None:
            self.idle += 1
        elif ok:
            self.idle = 0
            self.useful.append(Used(tool, arguments, text))
            self.answered.add(tool)
            self._known |= _words(" ".join(_leaves(arguments)))
        # A useful call that failed neither helps nor stalls: the model may try it another way.

    def changed(self, paths: Iterable[str]) -> None:
        """An edit changed `paths`: progress, and any call may now return something new (a read
        of a changed file is no repeat); the paths are values the model may use."""
        self._fresh.clear()
        self.idle = 0
        self._known |= _words(" ".join(paths))

    def answer(self, words: str) -> str:
        """The turn's answer: the model's `words`, with the last useful result added where the
        words do not quote it (or alone, where there are no words)."""
        words = words.strip()
        if not self.useful:
            return words
        last = self.useful[-1]
        if words and _quotes(words, last.text):
            return words
        summary = f"{last.tool} returned:\n{_bounded(last.text)}"  # a file read is 400 lines
        return f"{words}\n\n{summary}" if words else summary

    def _asked_done(self) -> bool:
        return bool(self.asked) and self.asked <= self.answered

    def _no_progress(self, tool: str, arguments: dict[str, Any], key: str) -> str | None:
        """Why the call would make no progress; None when it would."""
        if key in self._fresh:
            return "it was already called with these arguments in this turn, and nothing changed since"
        if tool in self.asked and tool not in self.answered:
            return None  # the task asked for it: its first answer is progress, whatever it is sent
        if tool in COMMANDS:
            return None  # a new command: its words are the model's own, not values to trace
        draws = _draws_on(arguments, self._known)
        if draws or (draws is None and not self.useful):
            return None  # a value from the task or a result, or a first look with no arguments
        if self._asked_done():
            names = ", ".join(sorted(self.asked))
            used = "this call uses nothing the task or a result gave"
            return f"the task asked for {names}, which answered, and {used}"
        if draws is None:
            return "it was called with no arguments after the task's results were in"
        return "its arguments come from neither the task nor a result"


def _bounded(result: str) -> str:
    text = result.strip()
    return text if len(text) <= TOLD_CHARS else text[:TOLD_CHARS] + "…"


def _names(task: str, tool: str) -> bool:
    """Whether `task` names `tool`: its whole name, or its own name (after the server's) as a word."""
    text = task.lower()
    own = tool.split("__", 1)[-1].lower()
    return tool.lower() in text or re.search(rf"(?<![\w-]){re.escape(own)}(?![\w-])", text) is not None


def _key(tool: str, arguments: dict[str, Any]) -> str:
    return f"{tool} {json.dumps(arguments, sort_keys=True, ensure_ascii=False)}"


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _leaves(value: Any) -> Iterator[str]:
    """The strings and numbers in an argument value (flags say nothing about where it came from)."""
    if isinstance(value, dict):
        for inner in value.values():
            yield from _leaves(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _leaves(inner)
    elif isinstance(value, str | int | float) and not isinstance(value, bool):
        yield str(value)


def _draws_on(arguments: dict[str, Any], known: set[str]) -> bool | None:
    """Whether a value of the arguments comes from `known` words (most of its words are there);
    None when there is no value to judge by."""
    leaves = [words for leaf in _leaves(arguments) if (words := _words(leaf))]
    if not leaves:
        return None
    return any(len(words & known) * 2 > len(words) for words in leaves)


def _quotes(words: str, result: str) -> bool:
    """Whether the answer's words carry the result: its text, or one of its lines of substance."""
    said = " ".join(words.lower().split())
    lines = [" ".join(line.lower().split()) for line in result.splitlines()]
    lines = [line for line in lines if len(line) >= 4] or [" ".join(result.lower().split())]
    return any(line in said for line in lines if line)
