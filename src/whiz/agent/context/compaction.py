"""Keeping a conversation inside the model's context window.

Before each model call the agent asks `Context.fit` whether the conversation, plus room for the
reply, still fits the window. When it does not, the conversation is compacted in stages, each
only if the one before was not enough:

1. long tool and command outputs, file contents and edit replies of earlier turns are cut to
   their head and tail, saying how much was cut (down to `TARGET_SHARE` of the room, so the
   next steps fit too);
2. the earlier turns are summarised by the model itself (one request), into one message that
   also keeps, written out by whiz rather than the model, the tasks so far, the files changed
   and the last test run;
3. the current turn's own long outputs are cut the same way (its last two items stay whole);
4. every item is cut to a share of what is left: a conversation that cannot fit even then
   raises `ContextFull`.

The recent part (the running turn, or for `/compact` between turns the latest turns that fit a
third of the window) always stays item for item. Token counts are estimates: exact for what the
server last counted (its usage), and for what was added since, characters at the rate the server's
counts showed (`CHARS_PER_TOKEN` until it has counted).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from whiz.agent.errors import WhizAgentError
from whiz.agent.models.seam import Finished, ModelClient, ModelRequest, ModelText
from whiz.agent.runs_check import shown
from whiz.errors import WhizError

CHARS_PER_TOKEN = 3.5
"""Characters of JSON-encoded items per token until the server has counted some: code and prose
run 3.5 to 4.5 with JSON's quoting, so this errs on the side of compacting early."""
RATE_SAFETY = 0.9
"""A learnt rate is used a little lower than measured: text to come may pack less well."""
LONG_CHARS = 1500
"""Contents longer than this are cut to their head and tail in stage 1 and 3."""
HEAD_CHARS, TAIL_CHARS = 600, 400
SUMMARY_TOKENS = 512
"""The most the model may write in a summary."""
TARGET_SHARE = 0.6
"""Compaction of earlier turns aims at this share of the input budget (or, for /compact, of what
the conversation took), leaving room for the steps to come."""
RECENT_SHARE = 3
"""Between turns, the latest turns kept verbatim take at most 1/RECENT_SHARE of the input budget."""

SUMMARY_INSTRUCTIONS = (
    "You summarise a coding session between a user and a coding agent so that the agent can go on "
    "without the full transcript. Write at most 200 words: what the user asked for, what was "
    "done and decided, which files were read or changed and why, what is still open, and any "
    "error or test failure that matters next. Plain sentences, no code blocks."
)


class ContextFull(WhizAgentError):
    """The conversation does not fit the context window, even compacted."""

    code = "context_full"


@dataclass
class Compacted:
    """What one compaction did: the new conversation, and the numbers a reader is shown."""

    items: list[dict[str, Any]]
    before_tokens: int
    after_tokens: int
    window_tokens: int
    shortened: int = 0
    """Items whose long contents were cut to head and tail."""
    summarised: int = 0
    """Items of earlier turns replaced by one summary."""
    kept: int = 0
    """Items at the end kept whole (the recent turns)."""
    reason: str = "the conversation would not fit the context window"

    def item(self) -> dict[str, Any]:
        """The `context_compacted` item's fields."""
        done = []
        if self.shortened:
            done.append(f"shortened {self.shortened} long outputs")
        if self.summarised:
            done.append(f"summarised {self.summarised} earlier items")
        return {
            "reason": self.reason,
            "before_tokens": self.before_tokens,
            "after_tokens": self.after_tokens,
            "window_tokens": self.window_tokens,
            "shortened": self.shortened,
            "summarised": self.summarised,
            "kept": self.kept,
            "summary": "; ".join(done) or "nothing to compact",
        }


@dataclass
class Context:
    """What the agent knows about its context use: the server's last count, and the facts a
    summary must keep (tasks and files changed, fed by the agent; `AgentSession` seeds them on
    a resume)."""

    tasks: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    test_cmd: str | None = None
    chars_per_token: float = CHARS_PER_TOKEN
    """The rate estimates use: learnt from the server's counts."""
    _counted: list[dict[str, Any]] = field(default_factory=list)
    _counted_tokens: int = 0
    _counted_instructions: str | None = None

    def note_turn(self, task: str | None = None, changed: list[str] = ()) -> None:
        """Remember a task asked, or files changed, for summaries."""
        if task:
            self.tasks.append(task)
        self.changed += [path for path in changed if path not in self.changed]

    def observe(self, request: ModelRequest, finished: Finished) -> None:
        """Learn the exact size of the conversation from the server's usage of the reply to `request`."""
        input_tokens = finished.usage.get("input_tokens")
        if not input_tokens:
            return
        self.learn_rate(request.instructions, request.items, input_tokens)
        self._counted = list(request.items) + list(finished.output_items)
        self._counted_tokens = input_tokens + (finished.usage.get("output_tokens") or 0)
        self._counted_instructions = request.instructions

    def estimate(self, instructions: str, items: list[dict[str, Any]]) -> int:
        """Tokens `instructions` and `items` take as input: the counted prefix, the rest estimated."""
        n = len(self._counted)
        if (
            n
            and instructions == self._counted_instructions
            and len(items) >= n
            and all(a is b for a, b in zip(items, self._counted, strict=False))
        ):
            return self._counted_tokens + self._items(items[n:])
        return self._text(instructions) + self._items(items)

    def learn_rate(self, instructions: str, items: list[dict[str, Any]], tokens: int) -> None:
        """Learn how many characters a token is from the server's count of a whole request."""
        chars = len(instructions) + sum(len(json.dumps(item, ensure_ascii=False)) for item in items)
        self.chars_per_token = min(CHARS_PER_TOKEN * 2, max(0.5, chars / tokens * RATE_SAFETY))

    def overflowed(self, instructions: str, items: list[dict[str, Any]], error: str) -> None:
        """The server refused a request as too long for its window: learn from the count in its
        error message (`needs N tokens`), and estimate afresh from now on."""
        self._counted, self._counted_tokens = [], 0
        if found := re.search(r"needs (\d+) tokens", error):
            self.learn_rate(instructions, items, int(found.group(1)))
        else:
            self.chars_per_token = min(self.chars_per_token, CHARS_PER_TOKEN) / 2

    def _text(self, text: str) -> int:
        return int(len(text) / self.chars_per_token) + 1

    def _items(self, items: list[dict[str, Any]]) -> int:
        return sum(self._text(json.dumps(item, ensure_ascii=False)) for item in items)

    async def fit(
        self,
        instructions: str,
        items: list[dict[str, Any]],
        *,
        window_tokens: int,
        reply_tokens: int,
        turn_start: int | None,
        summariser: ModelClient | None,
        force: bool = False,
    ) -> Compacted | None:
        """The compacted conversation when `items` (with room for a reply of `reply_tokens`) would
        not fit `window_tokens`, or always when `force`; None when nothing needs doing.

        `turn_start` is where the running turn's items begin (None between turns): they are kept."""
        budget = input_budget(window_tokens, reply_tokens)
        before = self.estimate(instructions, items)
        if before <= budget and not force:
            return None
        fixed = self._text(instructions)
        # Earlier turns are compacted well below the limit, so the steps that follow fit without
        # another compaction (each one costs the server its cached prefix).
        target = int(budget * TARGET_SHARE)
        if force:
            target = min(target, int(before * TARGET_SHARE))
        target = max(fixed + 1, target)
        keep_from = (
            turn_start
            if turn_start is not None
            else recent_start(items, (budget - fixed) // RECENT_SHARE, self._items)
        )
        old, recent = [dict(i) for i in items[:keep_from]], [dict(i) for i in items[keep_from:]]
        done = Compacted(items, before, before, window_tokens, kept=len(recent))
        if force:
            done.reason = "asked for (/compact)"

        def size() -> int:
            return fixed + self._items(old) + self._items(recent)

        done.shortened += shorten(old, len(old), lambda: size() <= target)
        if size() > target and old:
            note = await self._summary(old, window_tokens, summariser)
            done.summarised, old = len(old), [{"type": "message", "role": "user", "content": note}]
        done.shortened += shorten(recent, len(recent) - 2, lambda: size() <= budget)
        if size() > budget:
            room = (budget - fixed) * self.chars_per_token / max(1, len(old) + len(recent))
            share = max(200, int(room) - 120)
            for item in old + recent:
                done.shortened += cut_item(item, share // 2, share // 2, limit=share)
        done.items = old + recent
        if force and done.items == items:
            return None  # nothing long, nothing earlier: there is nothing to compact
        done.after_tokens = fixed + self._items(done.items)
        if done.after_tokens > budget:
            raise ContextFull(
                f"the conversation needs about {done.after_tokens} tokens even compacted, but the "
                f"context window of {window_tokens} tokens leaves {budget} for it"
            )
        return done

    async def _summary(
        self, old: list[dict[str, Any]], window_tokens: int, summariser: ModelClient | None
    ) -> str:
        """The message that stands for the earlier turns: whiz's own facts, then the model's summary."""
        lines = ["(The earlier part of this conversation was compacted to fit the context window.)"]
        if self.tasks:
            lines.append("Tasks so far:\n" + "\n".join(f"- {one_line(t, 300)}" for t in self.tasks[-20:]))
        if self.changed:
            lines.append("Files changed so far: " + ", ".join(self.changed[-50:]))
        test = last_test_run(old, self.test_cmd)
        if test:
            lines.append(f"Last test run:\n{test}")
        summary = await summarise(old, window_tokens, summariser, self.chars_per_token) if summariser else ""
        if summary:
            lines.append("Summary of the earlier turns:\n" + summary)
        return "\n\n".join(lines)


def input_budget(window_tokens: int, reply_tokens: int) -> int:
    """Tokens the input may take: the window less the reply's room and a margin for estimate error."""
    margin = max(32, window_tokens // 32)
    return max(1, window_tokens - reply_tokens - margin)


def recent_start(
    items: list[dict[str, Any]], budget_tokens: int, tokens: Callable[[list[dict[str, Any]]], int]
) -> int:
    """Where the recent part begins: the earliest user message from which the rest fits
    `budget_tokens` (at least the last user message on), so a call and its output stay together."""
    starts = [i for i, item in enumerate(items) if item.get("role") == "user"]
    if not starts:
        return len(items)
    chosen, used, end = starts[-1], 0, len(items)
    for start in reversed(starts):
        used += tokens(items[start:end])
        end = start
        if used > budget_tokens:
            break
        chosen = start
    return chosen


def text_of(item: dict[str, Any]) -> tuple[str, str] | None:
    """The key and text of an item's long content (a message's text, a tool output), if any."""
    for key in ("content", "output"):
        if isinstance(item.get(key), str):
            return key, item[key]
    return None


def cut_item(
    item: dict[str, Any], head: int = HEAD_CHARS, tail: int = TAIL_CHARS, *, limit: int = LONG_CHARS
) -> int:
    """Cut `item`'s content to its head and tail when longer than `limit`; 1 if it was cut."""
    found = text_of(item)
    if found is None or len(found[1]) <= limit:
        return 0
    key, text = found
    cut = text[head : len(text) - tail]
    note = (
        f"\n[... {cut.count(chr(10)) + 1} lines ({len(cut)} characters) cut to fit the context window ...]\n"
    )
    item[key] = text[:head] + note + text[len(text) - tail :]
    return 1


def shorten(items: list[dict[str, Any]], upto: int, enough: Callable[[], bool]) -> int:
    """Cut long contents among the first `upto` items, oldest first, until `enough()`; how many were cut."""
    count = 0
    for item in items[: max(0, upto)]:
        if enough():
            break
        count += cut_item(item)
    return count


def last_test_run(items: list[dict[str, Any]], test_cmd: str | None) -> str:
    """The end of the latest output of the test command in `items` ('' if none)."""
    if not test_cmd:
        return ""
    marker = f"$ {shown(test_cmd).strip()}\n"  # as the tool's output shows it
    for item in reversed(items):
        found = text_of(item)
        if found and marker in found[1]:
            text = found[1][found[1].rindex(marker) :]
            return text if len(text) <= 800 else text[:200] + "\n[...]\n" + text[-600:]
    return ""


def one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def transcript(items: list[dict[str, Any]], limit_chars: int) -> str:
    """`items` as plain text for the summariser, the latest `limit_chars` of it."""
    parts = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            parts.append(f"[agent calls {item.get('name')}] {item.get('arguments', '')}")
        elif kind == "function_call_output":
            parts.append(f"[tool output] {item.get('output', '')}")
        elif (found := text_of(item)) is not None:
            parts.append(f"[{item.get('role', 'user')}] {found[1]}")
    text = "\n\n".join(parts)
    return text if len(text) <= limit_chars else "[...]\n" + text[-limit_chars:]


async def summarise(
    items: list[dict[str, Any]], window_tokens: int, model: ModelClient, chars_per_token: float
) -> str:
    """The model's summary of `items` ('' when it fails: the facts whiz keeps are enough to go on)."""
    room = input_budget(window_tokens, SUMMARY_TOKENS) - 64
    chars = int(room * chars_per_token * 0.8) - len(SUMMARY_INSTRUCTIONS)
    text = transcript(items, max(500, chars))
    request = ModelRequest(
        SUMMARY_INSTRUCTIONS,
        [{"type": "message", "role": "user", "content": "The session so far:\n\n" + text}],
        max_output_tokens=SUMMARY_TOKENS,
    )
    reply, status = "", "failed"
    try:
        async for event in model.respond(request):
            if isinstance(event, ModelText):
                reply += event.text
            elif isinstance(event, Finished):
                status = event.status
    except WhizError:  # a lost connection shows at the next request; the facts are enough to go on
        return ""
    return reply.strip() if status in ("completed", "incomplete") else ""
