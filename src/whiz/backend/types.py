"""Plain data passed across the backend seam."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from whiz.chat.messages import Message, Tool, ToolCall
from whiz.engine.types import GenerationStats, SamplingParams


@dataclass(frozen=True)
class BackendInfo:
    """What clients may ask about the model behind a backend."""

    model: str
    n_ctx: int | None
    """The most tokens one conversation may hold, where the backend knows it."""
    max_candidates: int | None = None
    """The most candidates (`n`) one request may ask for, where the backend knows it."""


@dataclass(frozen=True)
class Resume:
    """A backend's own record of the first `n_messages` messages of a conversation.

    The engine keeps the exact token ids there, so a follow-up appends only the new messages'
    tokens and finds the rest in its KV cache; a stateless upstream keeps nothing (None).
    """

    state: Any
    n_messages: int


@dataclass
class TurnRequest:
    """One model turn, at the level of messages."""

    system: str | None
    """The system prompt (None: the backend's default)."""
    messages: list[Message]
    """The whole conversation after the system prompt, this turn's new messages last."""
    tools: tuple[Tool, ...] = ()
    max_tokens: int | None = None
    """None: as many as fit."""
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop: Sequence[str] = ()
    prediction: str | None = None
    speculation: bool = True
    tool_grammar: bool = True
    """Constrain the model's tool calls to the offered tools' schemas (where the backend can)."""
    tool_choice: str | None = None
    """None: the model decides whether to call a tool; "required": it must; a tool's name: it must
    call that one (enforced where the tool grammar is on)."""
    continue_last: bool = False
    """The reply continues the last message, an assistant's text, instead of starting a new turn
    (Chat Completions' `continue_final_message`)."""
    generate: bool = True
    """False only loads the conversation into the backend's cache (a warm-up); nothing is produced."""
    session: str | None = None
    """An explicit session: a WebSocket connection, a session header, or prompt_cache_key."""
    chain: str | None = None
    """The first response of a previous_response_id chain (routes the chain's turns together)."""
    cache_key: str | None = None
    """The client's prompt_cache_key, forwarded to upstreams that honour it."""
    resume: Resume | None = None
    input_param: str = "input"
    """The request parameter named in errors about the input (context length)."""
    tenant: str | None = None
    """Whose request this is (a hash of its API key): cached prompts are shared only within one."""


@dataclass
class TextDelta:
    text: str


@dataclass
class TurnResult:
    """A finished turn: its text and tool calls, counts and timings, and how to continue it."""

    text: str
    tool_calls: list[ToolCall]
    stats: GenerationStats
    finish_reason: str
    """stop, length, cancelled or error."""
    output_tokens: int
    state: Any = None
    """The backend's record of the conversation through this reply (see `Resume`)."""
    steps: list[tuple[float, int]] = field(default_factory=list)
    """(ms since the turn started, tokens) for each decode step, where the backend sees them."""

    def message(self) -> Message:
        content = self.text.strip() if self.tool_calls else self.text
        return Message("assistant", content, tuple(self.tool_calls))
