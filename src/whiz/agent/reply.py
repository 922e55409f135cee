"""One reply as it streams: its text to the UI as it comes, its tool calls, and how it ended.

A reply that goes into a loop (the same lines over and over, `repetition.py`) is stopped there,
and what came before it is kept as the reply.
"""

from __future__ import annotations

from dataclasses import dataclass

from whiz.agent.control import Steps
from whiz.agent.events import Emitter
from whiz.agent.models.seam import Finished, ModelClient, ModelRequest, ModelText, ModelToolCall, output_items
from whiz.agent.repetition import looping


@dataclass
class Reply:
    """What the model said: its text and the function calls it made."""

    text: str
    calls: list[ModelToolCall]


async def read_reply(
    model: ModelClient,
    request: ModelRequest,
    emit: Emitter,
    steps: Steps,
) -> tuple[Reply, Finished]:
    """Stream `model`'s reply to `request`, its text as an `agent_message` item, while `steps`
    says the step waits on the model (`Steps.in_model`)."""
    text, calls, finished, item = "", [], Finished("failed", error="no reply"), None
    looped: int | None = None
    steps.in_model = True
    try:
        async for event in model.respond(request):
            if isinstance(event, ModelText) and event.text:
                if item is None:
                    item = emit.start("agent_message", text="")
                text += event.text
                item["text"] = text
                emit.emit("item.updated", item=dict(item), delta=event.text)
                if looped is None and (looped := looping(text, event.text)) is not None:
                    await steps.cancel_model()  # the rest would be the loop, to the output limit
            elif isinstance(event, ModelToolCall):
                calls.append(event)
            elif isinstance(event, Finished):
                finished = event
        if looped is not None and not steps.cancelled:
            text = text[:looped]
            finished.status, finished.output_items = "completed", output_items(text, calls)
            emit.single("error", message="the reply went into a loop, the same lines over and over: "
                        "it was stopped there, and what came before is kept")  # fmt: skip
    finally:
        steps.in_model = False
        if item is not None:
            emit.complete(item, text=text, whiz=finished.timings)
    return Reply(text, calls), finished


def cut_by_window(finished: Finished, max_output_tokens: int | None) -> bool:
    """Whether an incomplete reply ended at the context window rather than at `max_output_tokens`:
    the server cuts the reply at the window's end, before the limit asked for."""
    written = finished.usage.get("output_tokens")
    if written is None:
        written = finished.timings.get("decode_tokens")
    return bool(max_output_tokens) and written is not None and written < max_output_tokens


def cut_off(finished: Finished, max_output_tokens: int | None) -> tuple[str, str]:
    """For a reply that ended incomplete: what the model is told, and the format error."""
    if cut_by_window(finished, max_output_tokens):
        # Not the model's fault: the next step compacts (the count now says it is full).
        told = "Your reply was cut off: the conversation filled the context window. Go on."
        return told, "the reply was cut off at the end of the context window"
    told = "Your reply was cut off because it was too long. Make smaller edits."
    return told, "the reply was cut off at the output limit"
