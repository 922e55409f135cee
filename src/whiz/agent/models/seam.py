"""The seam between the agent and a model: a request in, a stream of events out, with cancel.

The agent keeps the whole conversation (Responses input items) and hands all of it over on each
call; an adapter decides what to send. `WhizModel` sends only the items the server has not seen,
chained with `previous_response_id`, so the server's KV cache stays warm. `ScriptedModel` replays
scripted replies for tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from whiz.agent.models.hollow import Hollow


@dataclass
class ModelRequest:
    """Everything a model call needs. `items` is the full conversation, oldest first."""

    instructions: str
    items: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    prediction: str | None = None
    """Text expected to appear in the reply (the file being edited), for Predicted Outputs."""
    max_output_tokens: int | None = None
    temperature: float | None = None
    """None: the client's own (the session's). The agent raises it for a retry after the model
    wrote the same code back: at temperature 0 the next reply is the same one again."""
    task: str | None = None
    """The turn's task as the user wrote it, without the files attached to it: a wrapper that
    plans edits itself (healing) reads which files it names."""
    retry_from: list[dict[str, Any]] | None = None
    """Set when the replies before owed an edit and made none (or repeated a malformed one word
    for word): the conversation before them, without the feedback on them. A wrapper that can
    draw several replies (healing) samples from it: told what was wrong, the 0.5B wrote its
    instructions back, and drawn from the task as given it wrote code."""
    edited: bool = False
    """Whether this turn has changed a file already: a wrapper that redraws retries does so only
    before the first edit."""
    hollow: Hollow | None = None
    """Functions `items` and `retry_from` show without their bodies (`hollow.py`): a wrapper that
    reads edits out of replies itself (healing) puts a body written as `...` back first."""

    @property
    def retry(self) -> bool:
        """Whether this call retries replies that made no edit (`retry_from`)."""
        return self.retry_from is not None


@dataclass
class ModelText:
    """A piece of the reply's text, as it streams."""

    text: str


@dataclass
class ModelToolCall:
    """A function call the model made; `arguments` is JSON text, as the wire carries it."""

    call_id: str
    name: str
    arguments: str


@dataclass
class Finished:
    """The last event of every call.

    `status` is completed, incomplete (hit the token limit), cancelled or failed. `output_items`
    are the reply as input items (assistant message, function calls): the agent appends exactly
    these to its conversation, so an adapter can tell which items the server already holds.
    """

    status: str
    output_items: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    """The server's `whiz` object: ttft_ms, prefill_ms, decode_tokens, decode_ms, tokens_per_s..."""
    error: str | None = None


ModelEvent = ModelText | ModelToolCall | Finished


class ModelClient(Protocol):
    """A model the agent can talk to."""

    def respond(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the reply to `request`; the last event is always `Finished`."""
        ...

    async def cancel(self) -> None:
        """Stop the reply in flight (the server stops too); its stream then finishes as cancelled."""
        ...


# A client may also say how many tokens its model holds, as `context_window: int | None`; the
# agent compacts the conversation to fit it (`compaction.py`).


class WrappedModel:
    """A `ModelClient` that sits around another one (`inner`): cancel and close go through to it.

    Subclasses write `respond`, changing what the agent gets (healing, whole-file answers).
    """

    def __init__(self, inner: ModelClient):
        self.inner = inner

    async def cancel(self) -> None:
        await self.inner.cancel()

    @property
    def context_window(self) -> int | None:
        """The inner model's context window in tokens, where it knows it."""
        return getattr(self.inner, "context_window", None)

    async def close(self) -> None:
        close = getattr(self.inner, "close", None)  # not every client holds a connection
        if close is not None:
            await close()


def output_items(text: str, calls: list[ModelToolCall]) -> list[dict[str, Any]]:
    """A reply as the input items that stand for it in the conversation."""
    items: list[dict[str, Any]] = []
    if text.strip():
        items.append({"type": "message", "role": "assistant", "content": text})
    for call in calls:
        items.append(
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments}
        )
    return items


def unwrapped(model: ModelClient) -> ModelClient:
    """The plain model under wrappers (healing, whole-file answers): what a summary is asked of."""
    while isinstance(model, WrappedModel):
        model = model.inner
    return model
