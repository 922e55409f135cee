"""The Responses API: turning a request into a turn, and the turn into Responses events.

HTTP (streaming or not) and the WebSocket mode share this code; they differ only in framing.
A finished response is kept as a `Conversation`: the exact tokens of every closed turn, so that a
follow-up naming it with `previous_response_id` appends only the new items' tokens, and the
engine finds everything before them in the KV cache.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from whiz.chat.messages import Message, Tool, ToolCall
from whiz.chat.template import ASSISTANT_START, ChatTemplate
from whiz.engine.types import GenerationStats, SamplingParams
from whiz.errors import ContextOverflow, InvalidRequest, WhizError
from whiz.seams import Engine
from whiz.server.protocol import ResponsesRequest
from whiz.server.turns import TextDelta, Turn, TurnSpec


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass
class Conversation:
    """What a later turn needs to continue a response."""

    tokens: list[int]
    """Tokens of every closed turn, through the end of the response."""
    messages: list[Message]
    system: str | None
    tools: tuple[Tool, ...]


class ResponseStore:
    """Recent responses by id, for `previous_response_id` and GET /v1/responses/{id}."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[str, tuple[dict, Conversation]] = OrderedDict()

    def put(self, response: dict, conversation: Conversation) -> None:
        self._items[response["id"]] = (response, conversation)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def get(self, response_id: str) -> tuple[dict, Conversation] | None:
        return self._items.get(response_id)


def usage(stats: GenerationStats, output_tokens: int) -> dict:
    return {
        "input_tokens": stats.prompt_tokens,
        "input_tokens_details": {"cached_tokens": stats.cached_tokens},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": stats.prompt_tokens + output_tokens,
    }


def timings(stats: GenerationStats) -> dict:
    """The `whiz` object every finished response carries (PROTOCOL.md §4)."""
    return {
        "ttft_ms": round(stats.ttft_ms, 2),
        "prefill_tokens": stats.prefill_tokens,
        "prefill_ms": round(stats.prefill_ms, 2),
        "decode_tokens": stats.decode_tokens,
        "decode_ms": round(stats.decode_ms, 2),
        "tokens_per_s": round(stats.tokens_per_s, 2),
        "draft_accepted": stats.draft_accepted,
        "draft_rejected": stats.draft_rejected,
    }


def timeline(steps: list[tuple[float, int]], max_rows: int = 240) -> list[list[float | int]]:
    """Decode steps as rows of [ms since the request, tokens, accepted draft tokens].

    A step yields one decoded token plus the draft tokens the model accepted in it (the contract
    of `TokenChunk`), so a step of n tokens holds n - 1 accepted drafts. Past `max_rows` steps,
    neighbours are merged so that a long reply stays a small payload.
    """
    group = max(1, -(-len(steps) // max_rows))
    rows: list[list[float | int]] = []
    for i in range(0, len(steps), group):
        part = steps[i : i + group]
        tokens = sum(n for _, n in part)
        accepted = sum(max(0, n - 1) for _, n in part)
        rows.append([round(part[-1][0], 1), tokens, accepted])
    return rows


@dataclass
class PreparedTurn:
    """A validated request, ready to run."""

    id: str
    request: ResponsesRequest
    model: str
    basis: list[int]
    """The conversation's tokens before this turn's reply."""
    messages: list[Message]
    system: str | None
    tools: tuple[Tool, ...]
    spec: TurnSpec
    created_at: int = field(default_factory=lambda: int(time.time()))


class ResponseEvents:
    """Builds the standard Responses streaming events for one response, in order."""

    def __init__(self, response: dict):
        self.response = response
        self._message: dict | None = None
        self._text = ""
        self._seq = 0

    def _event(self, type_: str, **fields: Any) -> dict:
        # Numbered here so HTTP streams carry them too; a WebSocket session renumbers per connection.
        self._seq += 1
        return {"type": type_, "sequence_number": self._seq - 1, **fields}

    def start(self) -> list[dict]:
        return [
            self._event("response.created", response=dict(self.response)),
            self._event("response.in_progress", response=dict(self.response)),
        ]

    def text(self, delta: str) -> list[dict]:
        events = []
        if self._message is None:
            if not delta.strip():
                return []  # leading whitespace before a tool call is not a message
            self._message = {
                "id": new_id("msg"),
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            self.response["output"].append(self._message)
            events.append(self._added(self._message))
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=self._message["id"],
                    output_index=self._index(self._message),
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []},
                )
            )
        self._text += delta
        events.append(
            self._event(
                "response.output_text.delta",
                item_id=self._message["id"],
                output_index=self._index(self._message),
                content_index=0,
                delta=delta,
                logprobs=[],
            )
        )
        return events

    def tool_call(self, call: ToolCall) -> list[dict]:
        events = self._close_message()
        item = {
            "id": new_id("fc"),
            "type": "function_call",
            "status": "in_progress",
            "call_id": call.id,
            "name": call.name,
            "arguments": "",
        }
        self.response["output"].append(item)
        index = self._index(item)
        events.append(self._added(item))
        events.append(
            self._event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=call.arguments,
            )
        )
        events.append(
            self._event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=call.name,
                arguments=call.arguments,
            )
        )
        item.update(arguments=call.arguments, status="completed")
        events.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
        return events

    def finish(self, status: str, **fields: Any) -> list[dict]:
        events = self._close_message()
        self.response.update(status=status, **fields)
        kind = {
            "completed": "response.completed",
            "incomplete": "response.incomplete",
            "cancelled": "response.incomplete",
            "failed": "response.failed",
        }[status]
        events.append(self._event(kind, response=self.response))
        return events

    def _close_message(self) -> list[dict]:
        if self._message is None:
            return []
        msg, self._message = self._message, None
        index = self._index(msg)
        part = {"type": "output_text", "text": self._text, "annotations": []}
        msg.update(status="completed", content=[part])
        self._text = ""
        return [
            self._event(
                "response.output_text.done",
                item_id=msg["id"],
                output_index=index,
                content_index=0,
                text=part["text"],
                logprobs=[],
            ),
            self._event(
                "response.content_part.done",
                item_id=msg["id"],
                output_index=index,
                content_index=0,
                part=part,
            ),
            self._event("response.output_item.done", output_index=index, item=dict(msg)),
        ]

    def _added(self, item: dict) -> dict:
        return self._event("response.output_item.added", output_index=self._index(item), item=dict(item))

    def _index(self, item: dict) -> int:
        return next(i for i, it in enumerate(self.response["output"]) if it is item)


class ResponsesService:
    """Prepares and runs Responses turns over one engine."""

    def __init__(self, engine: Engine, template: ChatTemplate, *, model_name: str, defaults: SamplingParams):
        self.engine = engine
        self.template = template
        self.model_name = model_name
        self.defaults = defaults

    def prepare(
        self, req: ResponsesRequest, previous: Conversation | None, *, session: str | None
    ) -> PreparedTurn:
        tools = tuple(req.tool_list())
        new = req.input_messages()
        if not new and previous is None:
            raise InvalidRequest("input must hold at least one item.", param="input")
        enc = self.template
        same_frame = (
            previous is not None
            and tools == previous.tools
            and (req.instructions is None or req.instructions == previous.system)
        )
        if same_frame:
            # The fast path: the previous response's exact tokens, then only the new items.
            system = previous.system
            messages = previous.messages + new
            basis = previous.tokens + enc.encode_turns(new)
        else:
            messages = (previous.messages if previous else []) + new
            system = req.instructions
            if system is None and previous is not None:
                system = previous.system
            if system is None and messages and messages[0].role == "system":
                system = messages[0].content
                messages = messages[1:]
            head = [Message("system", system)] if system is not None else []
            basis = enc.encode(head + messages, tools, add_generation_prompt=False)
        prompt = basis + enc.tokenizer.encode(ASSISTANT_START) if req.generate else basis
        limit = self.engine.info.n_ctx
        if len(prompt) >= limit:
            raise ContextOverflow(len(prompt), limit)
        sampling = req.sampling(self.defaults)
        max_tokens = (req.max_output_tokens or limit) if req.generate else 0
        prediction = enc.tokenizer.encode(req.prediction.text()) if req.prediction else None
        spec = TurnSpec(
            prompt,
            max_tokens,
            sampling,
            parse_tools=bool(tools),
            session=session,
            prediction=prediction,
            speculation=req.speculation(),
        )
        return PreparedTurn(
            new_id("resp"), req, req.model or self.model_name, basis, messages, system, tools, spec
        )

    def skeleton(self, turn: PreparedTurn) -> dict:
        req = turn.request
        return {
            "id": turn.id,
            "object": "response",
            "created_at": turn.created_at,
            "status": "in_progress",
            "model": turn.model,
            "output": [],
            "instructions": req.instructions,
            "previous_response_id": req.previous_response_id,
            "max_output_tokens": req.max_output_tokens,
            "temperature": turn.spec.sampling.temperature,
            "top_p": turn.spec.sampling.top_p,
            "tools": req.tools or [],
            "tool_choice": req.tool_choice or "auto",
            "parallel_tool_calls": True,
            "store": req.store,
            "metadata": req.metadata or {},
            "text": {"format": {"type": "text"}},
            "error": None,
            "incomplete_details": None,
            "usage": None,
        }

    def start(self, turn: PreparedTurn) -> ResponseRun:
        return ResponseRun(self, turn)

    def acknowledge_warmup(self, turn: PreparedTurn) -> tuple[list[dict], Conversation]:
        """The events of a `generate: false` turn answered before its prefill has run.

        The conversation it leaves is known without the engine: exactly the prompt's tokens.
        """
        events = ResponseEvents(self.skeleton(turn))
        stats = GenerationStats(prompt_tokens=len(turn.basis))
        out = events.start() + events.finish("completed", usage=usage(stats, 0), whiz=timings(stats))
        return out, Conversation(turn.basis, turn.messages, turn.system, turn.tools)


class ResponseRun:
    """One response in flight: iterate `events()`; `cancel()` from anywhere; then read `conversation`."""

    def __init__(self, service: ResponsesService, turn: PreparedTurn):
        self.service = service
        self.turn = turn
        self.conversation: Conversation | None = None
        self.response: dict | None = None
        self._live: Turn | None = None
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True
        if self._live is not None:
            self._live.cancel()

    async def events(self) -> AsyncIterator[dict]:
        """The response's events; the last one is terminal (completed, incomplete or failed)."""
        service, turn = self.service, self.turn
        events = ResponseEvents(service.skeleton(turn))
        self.response = events.response
        for ev in events.start():
            yield ev
        try:
            self._live = Turn(service.engine, turn.spec)
        except WhizError as exc:
            for ev in events.finish("failed", error={"code": exc.code, "message": exc.message}):
                yield ev
            return
        if self._cancelled:
            self._live.cancel()
        async for piece in self._live.events():
            batch = events.text(piece.text) if isinstance(piece, TextDelta) else events.tool_call(piece)
            for ev in batch:
                yield ev
        result = self._live.result
        stats = result.stats
        # Close the assistant turn so the stored tokens are exactly what a follow-up continues.
        if turn.request.generate:
            closing = service.engine.tokenizer.encode("<|im_end|>\n")
            tokens = turn.spec.prompt + result.output_tokens + closing
            messages = turn.messages + [result.message()]
            service.template.remember(result.body, result.output_tokens)
        else:
            tokens, messages = turn.basis, turn.messages
        self.conversation = Conversation(tokens, messages, turn.system, turn.tools)
        extra: dict[str, Any] = {"usage": usage(stats, len(result.output_tokens)), "whiz": timings(stats)}
        if turn.request.wants_timeline():
            extra["whiz"]["timeline"] = timeline(result.steps)
        if result.finish_reason == "error":
            status = "failed"
            extra["error"] = {"code": "engine_error", "message": stats.error or "generation failed"}
        elif result.finish_reason == "cancelled":
            status = "cancelled"
            extra["incomplete_details"] = {"reason": "cancelled"}
        elif result.finish_reason == "length" and turn.request.generate:
            status = "incomplete"
            extra["incomplete_details"] = {"reason": "max_output_tokens"}
        else:
            status = "completed"
        for ev in events.finish(status, **extra):
            yield ev
