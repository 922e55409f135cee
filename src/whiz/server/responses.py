"""The Responses API: turning a request into a turn, and the turn into Responses events.

HTTP (streaming or not) and the WebSocket mode share this code; they differ only in framing.
A finished response is kept as a `Conversation`: its messages and the backend's own state of them
(for the engine, the exact tokens of every closed turn), so that a follow-up naming it with
`previous_response_id` appends only the new items, and the engine finds everything before them in
the KV cache. A stateless upstream gets the whole conversation again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from whiz.backend.types import Resume, TextDelta, TurnRequest
from whiz.chat.messages import Message, Tool, ToolCall
from whiz.engine.types import GenerationStats, SamplingParams
from whiz.errors import ContextOverflow, InvalidRequest, WhizError
from whiz.seams import Backend, BackendTurn
from whiz.server.call_limit import CallLimit
from whiz.server.keepalive import with_keepalive
from whiz.server.protocol import (
    OFF_LOOP_CHARS,
    ResponsesRequest,
    TurnDefaults,
    check_tool_outputs,
    custom_input,
    input_chars,
    required_tool,
)
from whiz.server.shapes import ended, response_resource

_SILENT = object()
"""What the model's stream gives while it says nothing for a while (see `keepalive.py`)."""


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass
class Conversation:
    """What a later turn needs to continue a response."""

    state: Any
    """The backend's record of every closed turn, through the end of the response."""
    messages: list[Message]
    system: str | None
    tools: tuple[Tool, ...]
    chain: str | None = None
    """The first response of its previous_response_id chain."""

    def call_ids(self) -> set[str]:
        """The ids of the tool calls made in the conversation (its outputs may answer them)."""
        return {c.id for m in self.messages for c in m.tool_calls}


def size_bytes(response: dict, conversation: Conversation | None) -> int:
    """About what a stored response holds in memory: its JSON, its messages, its token state."""
    if conversation is None:
        return len(json.dumps(response))
    text = sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls) for m in conversation.messages)
    state = conversation.state
    n_state = len(state) if isinstance(state, list | tuple) else 0
    # A token id in a Python list costs a pointer and, past the small-int cache, an int object.
    return len(json.dumps(response)) + text + len(conversation.system or "") + 36 * n_state


@dataclass
class _Stored:
    response: dict
    conversation: Conversation | None
    """None for a response that cannot be continued (failed or cancelled)."""
    size: int
    at: float
    tenant: str | None


class ResponseStore:
    """Recent responses by id, for `previous_response_id` and GET /v1/responses/{id}.

    Bounded by count, by bytes and by age: a client that stores large responses forever must not
    grow the server without end. Each response is filed under its tenant (a digest of its API
    key): another key asking for it is told there is no such response, exactly as for an id that
    never existed, so an id seen in a log or a screenshot reads nothing.

    Tenants share the store fairly. While there is room anyone may use it; when it is full, the
    tenant holding the most (by count, or by bytes when bytes overflow) gives up its own oldest
    response. So a tenant that stores thousands of responses pushes out only its own, down to
    what each of the others holds, and never another tenant's last conversation. With one tenant
    (a server without keys) this is plain oldest-first.
    """

    def __init__(
        self,
        capacity: int,
        *,
        max_bytes: int | None = None,
        ttl_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._clock = clock
        self._items: OrderedDict[str, _Stored] = OrderedDict()
        """Every stored response, oldest first (for expiry)."""
        self._by_tenant: dict[str | None, OrderedDict[str, None]] = {}
        """Each tenant's ids, oldest first (for its evictions)."""
        self._tenant_bytes: dict[str | None, int] = {}
        self.bytes = 0

    def put(self, response: dict, conversation: Conversation | None, tenant: str | None = None) -> None:
        size = size_bytes(response, conversation)
        if self.max_bytes is not None and size > self.max_bytes:
            return  # larger than the whole store: keeping it would evict everything else
        self._drop(response["id"])
        self._items[response["id"]] = _Stored(response, conversation, size, self._clock(), tenant)
        self._by_tenant.setdefault(tenant, OrderedDict())[response["id"]] = None
        self._tenant_bytes[tenant] = self._tenant_bytes.get(tenant, 0) + size
        self.bytes += size
        self._expire()
        while len(self._items) > self.capacity:
            self._evict(by_bytes=False)
        while self.max_bytes is not None and self.bytes > self.max_bytes:
            self._evict(by_bytes=True)

    def get(self, response_id: str, tenant: str | None = None) -> tuple[dict, Conversation | None] | None:
        """The response and its conversation, if `tenant` stored it (None: a server without keys)."""
        self._expire()
        found = self._items.get(response_id)
        if found is None or found.tenant != tenant:
            return None
        return found.response, found.conversation

    def held(self, tenant: str | None) -> int:
        """How many responses `tenant` has stored."""
        return len(self._by_tenant.get(tenant, ()))

    def _evict(self, *, by_bytes: bool) -> None:
        """Drop the oldest response of the tenant holding the most (ties: the oldest response)."""

        def share(tenant: str | None) -> tuple[int, float]:
            held = self._tenant_bytes[tenant] if by_bytes else len(self._by_tenant[tenant])
            oldest = self._items[next(iter(self._by_tenant[tenant]))].at
            return held, -oldest

        victim = max(self._by_tenant, key=share)
        self._drop(next(iter(self._by_tenant[victim])))

    def _drop(self, response_id: str) -> None:
        found = self._items.pop(response_id, None)
        if found is None:
            return
        self.bytes -= found.size
        mine = self._by_tenant[found.tenant]
        del mine[response_id]
        self._tenant_bytes[found.tenant] -= found.size
        if not mine:
            del self._by_tenant[found.tenant], self._tenant_bytes[found.tenant]

    def _expire(self) -> None:
        if self.ttl_s is None:
            return
        oldest = self._clock() - self.ttl_s
        while self._items and next(iter(self._items.values())).at < oldest:
            self._drop(next(iter(self._items)))


UNCONTINUABLE = ("failed", "cancelled")
"""A response that ended so holds no conversation to go on from: a failed one never finished its
turn, and a cancelled one stops where the client stopped caring."""


def not_continuable(response_id: str, why: str) -> InvalidRequest:
    """The error of a `previous_response_id` that cannot be continued, saying why. Its code is
    `previous_response_not_found`, the one every client already answers by sending the full input."""
    return InvalidRequest(
        f"Previous response '{response_id}' {why}, so it cannot be continued. Continue from the "
        "response before it, or send the full input.",
        param="previous_response_id",
        code="previous_response_not_found",
    )


def ended_why(response: dict) -> str:
    """Why a stored response cannot be continued, in words."""
    error = response.get("error") or {}
    reason = f" ({error['message']})" if error.get("message") else ""
    return f"{response.get('status')}{reason}"


def stored_conversation(
    store: ResponseStore, response_id: str | None, tenant: str | None
) -> Conversation | None:
    """The stored conversation `previous_response_id` names (None when it names none), or the error
    saying why there is none to continue."""
    if response_id is None:
        return None
    found = store.get(response_id, tenant)
    if found is None:
        raise InvalidRequest(
            f"Previous response '{response_id}' was not found. Send the full input instead.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    response, conversation = found
    if conversation is None:
        raise not_continuable(response_id, ended_why(response))
    return conversation


def usage(stats: GenerationStats, output_tokens: int) -> dict:
    return {
        "input_tokens": stats.prompt_tokens,
        "input_tokens_details": {"cached_tokens": stats.cached_tokens},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": stats.prompt_tokens + output_tokens,
    }


def timings(stats: GenerationStats) -> dict:
    """The `whiz` object every finished response carries (docs/protocol.md, Timings)."""
    where = {"replica": stats.replica} if stats.replica else {}  # which upstream ran it, behind a gateway
    # What whiz changed about the request (a dropped grammar, a cut prediction) comes last.
    return where | {
        "ttft_ms": round(stats.ttft_ms, 2),
        "prefill_tokens": stats.prefill_tokens,
        "prefill_ms": round(stats.prefill_ms, 2),
        "decode_tokens": stats.decode_tokens,
        "decode_ms": round(stats.decode_ms, 2),
        "tokens_per_s": round(stats.tokens_per_s, 2),
        "draft_accepted": stats.draft_accepted,
        "draft_rejected": stats.draft_rejected,
        **stats.notes,
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
    live: BackendTurn
    """The backend's turn, not yet running."""
    messages: list[Message]
    system: str | None
    tools: tuple[Tool, ...]
    sampling: SamplingParams
    chain: str
    created_at: int = field(default_factory=lambda: int(time.time()))


class ResponseEvents:
    """Builds the standard Responses streaming events for one response, in order."""

    def __init__(self, response: dict, custom: frozenset[str] = frozenset()):
        self.response = response
        self.custom = custom
        """Custom tools: a call to one is a `custom_tool_call` with free-text input."""
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

    def still_in_progress(self, progress: dict[str, int] | None = None) -> dict:
        """`response.in_progress` again: the keep-alive of a long silence (a prefill), with how
        far the prompt's prefill has come where the backend knows (`prompt_progress`)."""
        extra = {"prompt_progress": progress} if progress else {}
        return self._event("response.in_progress", response=dict(self.response), **extra)

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
        """A call as its item: a `function_call` with JSON arguments, or, for a custom tool, a
        `custom_tool_call` whose input is the text the tool takes."""
        if call.name in self.custom:
            kind, prefix, field, stem = "custom_tool_call", "ctc", "input", "response.custom_tool_call_input"
            value = custom_input(call)
            done = {"input": value}
        else:
            kind, prefix, field, stem = "function_call", "fc", "arguments", "response.function_call_arguments"
            value = call.arguments
            done = {"name": call.name, "arguments": value}
        out = self._close_message()
        item = {
            "id": new_id(prefix),
            "type": kind,
            "status": "in_progress",
            "call_id": call.id,
            "name": call.name,
        }
        item[field] = ""
        self.response["output"].append(item)
        index = self._index(item)
        out.append(self._added(item))
        out.append(self._event(f"{stem}.delta", item_id=item["id"], output_index=index, delta=value))
        out.append(self._event(f"{stem}.done", item_id=item["id"], output_index=index, **done))
        item.update({field: value, "status": "completed"})
        out.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
        return out

    def finish(self, status: str, **fields: Any) -> list[dict]:
        events = self._close_message()
        ended(self.response, status, **fields)
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


def start_truncating(backend: Backend, request: TurnRequest) -> tuple[BackendTurn, TurnRequest]:
    """Start `request`, dropping the conversation's oldest messages while it does not fit the
    context window (`truncation: "auto"`); the newest message always stays. Returns the turn
    and the request as it was started."""
    while True:
        try:
            return backend.start(request), request
        except ContextOverflow as exc:
            messages = request.messages
            if len(messages) <= 1:
                raise
            # Drop about the share of text that is over, and a little more, so that a long
            # conversation takes a few tries, not one per message.
            over = 1 - 0.9 * exc.limit / exc.needed
            total = sum(len(m.content) + 64 for m in messages[:-1]) or 1
            drop, dropped = 0, 0
            while drop < len(messages) - 1 and (dropped < over * total or drop == 0):
                dropped += len(messages[drop].content) + 64
                drop += 1
            # A tool result without the call it answers means nothing to the model.
            while drop < len(messages) - 1 and messages[drop].role == "tool":
                drop += 1
            request = dataclasses.replace(request, messages=messages[drop:], resume=None)


class ResponsesService:
    """Prepares and runs Responses turns on one backend."""

    def __init__(self, backend: Backend, defaults: TurnDefaults):
        self.backend = backend
        self.defaults = defaults

    async def prepare_async(self, req: ResponsesRequest, *args: Any, **kwargs: Any) -> PreparedTurn:
        """`prepare`, with a large input tokenized on a worker thread so the event loop keeps serving."""
        # Tools too: their grammar is built with the turn, and a schema can cost seconds of it.
        if input_chars(req) > OFF_LOOP_CHARS or req.tools:
            return await asyncio.to_thread(self.prepare, req, *args, **kwargs)
        return self.prepare(req, *args, **kwargs)

    def prepare(
        self,
        req: ResponsesRequest,
        previous: Conversation | None,
        *,
        session: str | None,
        tenant: str | None = None,
    ) -> PreparedTurn:
        tools = tuple(req.tool_list())
        new = req.input_messages()
        check_tool_outputs(req.input, previous.call_ids() if previous else set())
        if not new and previous is None:
            raise InvalidRequest("input must hold at least one item.", param="input")
        same_frame = (
            previous is not None
            and tools == previous.tools
            and (req.instructions is None or req.instructions == previous.system)
        )
        resume = None
        if same_frame:
            # The fast path: the previous response as the backend holds it, then only the new items.
            system = previous.system
            messages = previous.messages + new
            # (None: the backend keeps no record of it, or one that no longer matches the messages.)
            resume = None if previous.state is None else Resume(previous.state, len(previous.messages))
        else:
            messages = (previous.messages if previous else []) + new
            system = req.instructions
            if system is None and previous is not None:
                system = previous.system
            if system is None and messages and messages[0].role == "system":
                system = messages[0].content
                messages = messages[1:]
        sampling = req.sampling(self.defaults.sampling)
        rid = new_id("resp")
        chain = previous.chain if previous is not None and previous.chain else rid
        request = TurnRequest(
            system,
            messages,
            tools,
            max_tokens=req.max_output_tokens or self.defaults.max_tokens,
            sampling=sampling,
            prediction=req.prediction.text() if req.prediction else None,
            speculation=req.speculation(),
            tool_grammar=req.tool_grammar(self.defaults.tool_grammar),
            tool_choice=required_tool(req.tool_choice),
            generate=req.generate,
            session=session,
            chain=chain,
            cache_key=req.prompt_cache_key,
            resume=resume,
            tenant=tenant,
        )
        if req.truncation == "auto":
            live, request = start_truncating(self.backend, request)
        else:
            live = self.backend.start(request)
        model = req.model or self.defaults.model_name
        return PreparedTurn(rid, req, model, live, request.messages, system, tools, sampling, chain)

    def skeleton(self, turn: PreparedTurn) -> dict:
        req = turn.request
        return response_resource(
            id=turn.id,
            created_at=turn.created_at,
            model=turn.model,
            request=req,
            temperature=turn.sampling.temperature,
            top_p=turn.sampling.top_p,
            strict_tools=req.tool_grammar(self.defaults.tool_grammar),
        )

    def start(self, turn: PreparedTurn) -> ResponseRun:
        return ResponseRun(self, turn)

    def acknowledge_warmup(self, turn: PreparedTurn) -> tuple[list[dict], Conversation]:
        """The events of a `generate: false` turn answered before its prefill has run.

        The conversation it leaves is known without running it: exactly the prompt.
        """
        events = ResponseEvents(self.skeleton(turn), turn.request.custom_tool_names())
        stats = GenerationStats(prompt_tokens=turn.live.prompt_tokens)
        out = events.start() + events.finish("completed", usage=usage(stats, 0), whiz=timings(stats))
        return out, Conversation(turn.live.basis, turn.messages, turn.system, turn.tools, turn.chain)


class ResponseRun:
    """One response in flight: iterate `events()`; `cancel()` from anywhere; then read `conversation`."""

    def __init__(self, service: ResponsesService, turn: PreparedTurn):
        self.service = service
        self.turn = turn
        self.conversation: Conversation | None = None
        """What a later turn continues; None until the run ends, and for a failed or cancelled one."""
        self.response: dict | None = None
        self.error: WhizError | None = None
        """Set when the backend failed the turn; the conversation is then left as it was."""

    def cancel(self) -> None:
        self.turn.live.cancel()

    async def events(self) -> AsyncIterator[dict]:
        """The response's events; the last one is terminal (completed, incomplete or failed)."""
        service, turn = self.service, self.turn
        events = ResponseEvents(service.skeleton(turn), turn.request.custom_tool_names())
        self.response = events.response
        limit = CallLimit(turn.request.max_tool_calls)
        for ev in events.start():
            yield ev
        try:
            async for piece in with_keepalive(turn.live.events(), lambda: _SILENT):
                if piece is _SILENT:
                    yield events.still_in_progress(turn.live.progress())
                    continue
                if isinstance(piece, TextDelta):
                    batch = events.text(piece.text)
                else:
                    batch = events.tool_call(piece) if limit.admits(piece) else []
                for ev in batch:
                    yield ev
        except WhizError as exc:
            self.error = exc
            for ev in events.finish("failed", error={"code": exc.code, "message": exc.message}):
                yield ev
            return
        result = turn.live.result
        assert result is not None
        stats = result.stats
        messages = turn.messages + [limit.message(result)] if turn.request.generate else turn.messages
        self.conversation = Conversation(limit.state(result), messages, turn.system, turn.tools, turn.chain)
        extra: dict[str, Any] = {"usage": usage(stats, result.output_tokens), "whiz": timings(stats)}
        if limit.dropped:
            extra["whiz"]["dropped_tool_calls"] = limit.dropped  # past max_tool_calls (call_limit.py)
        if ignored := turn.request.ignored_tools():
            extra["whiz"]["ignored_tools"] = ignored  # tools only a hosted service runs
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
        if status in UNCONTINUABLE:
            self.conversation = None
        for ev in events.finish(status, **extra):
            yield ev
