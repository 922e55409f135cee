"""The Responses API's WebSocket mode: one `Session` per connection.

The session keeps the latest response's conversation, so a turn sends `previous_response_id`
and only its new items. Turns run one at a time from a queue; `response.cancel`, or the socket
closing, cancels the running one within a decode step. A bad event gets an `error` event and the
session goes on.

A `generate: false` warm-up is answered at once and its prefill goes on in the background; the
connection's next turn starts when it is done. Clients warm up right after connecting and may
give up on a warm-up that takes long (the Codex CLI waits about 15 s, less than a 6k-token
prompt takes to prefill on a laptop CPU), so an instant answer keeps them on this connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Literal

from starlette.websockets import WebSocket, WebSocketDisconnect

from whiz.errors import InvalidRequest, RateLimited, WhizError
from whiz.server.protocol import ResponsesRequest, parse, read_json
from whiz.server.responses import Conversation, ResponseRun, ended_why, not_continuable

if TYPE_CHECKING:
    from whiz.server.state import ServerState

log = logging.getLogger("whiz.server")

EVICTED = "was evicted from this connection when a continuation of it failed (and it was not stored)"
GONE_REMEMBERED = 16
"""Failed, cancelled and evicted responses a connection remembers, to say why one cannot be
continued; older ones get the plain `previous_response_not_found`."""


def read_event(data: object) -> tuple[str, ResponsesRequest | None]:
    """A decoded event: its type, and for `response.create` the request it carries."""
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise InvalidRequest("Each event must be a JSON object with a string 'type'.", param="type")
    if data["type"] != "response.create":
        return data["type"], None
    body = {k: v for k, v in data.items() if k not in ("type", "event_id")}
    # Some clients nest the body under "response", as in the Realtime API.
    if isinstance(body.get("response"), dict):
        body = {**body.pop("response"), **body}
    return "response.create", parse(ResponsesRequest, body)


class Session:
    """One WebSocket connection: its state, its queue of turns, its worker task."""

    def __init__(self, ws: WebSocket, state: ServerState, key: str | None, session_id: str | None = None):
        self.ws = ws
        self.app = state
        self.key = key
        # A client-named session (a header) keeps its cache and replica across reconnects.
        self.id = session_id or "sess_" + hex(id(self))[2:]
        self.state: Literal["idle", "running", "closed"] = "idle"
        # Bounded: a client that sends faster than turns run gets an error, not unbounded memory.
        self.queue: asyncio.Queue[ResponsesRequest] = asyncio.Queue(maxsize=state.settings.ws_queue_max)
        self.tenant = state.tenant(key, ws.headers)
        self.client_host = ws.client.host if ws.client else None
        self.latest: tuple[str, Conversation] | None = None
        self.gone: OrderedDict[str, str] = OrderedDict()
        """Responses of this connection that cannot be continued, and why (the newest few)."""
        self.current: ResponseRun | None = None
        self.warming: asyncio.Task | None = None
        self._seq = 0
        self._send_lock = asyncio.Lock()
        self._worker: asyncio.Task | None = None

    async def serve(self) -> None:
        """Receive events until the client goes away."""
        self._worker = asyncio.create_task(self._work())
        try:
            while True:
                message = await self.ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                if message.get("text") is not None:
                    await self._on_event(message["text"])
                else:  # a binary frame: not an event, but no reason to end the session either
                    await self.send_error(
                        InvalidRequest(
                            "Events must be sent as text frames holding JSON, not binary frames.",
                            code="invalid_json",
                        )
                    )
        except WebSocketDisconnect:
            pass
        finally:
            await self.close()

    def busy(self) -> bool:
        """Whether a turn runs or waits on this connection (a drain waits for it)."""
        return self.state == "running" or bool(self.queue.qsize())

    async def close(self) -> None:
        self.state = "closed"
        if self.current is not None:
            self.current.cancel()
        if self.warming is not None:
            self.warming.cancel()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker

    async def send(self, event: dict) -> None:
        event["sequence_number"] = self._seq
        self._seq += 1
        async with self._send_lock:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                await self.ws.send_text(json.dumps(event))

    async def send_error(self, exc: WhizError) -> None:
        self.app.metrics.error(exc.code)
        await self.send({"type": "error", "status": exc.status, "error": exc.to_dict()})

    async def _on_event(self, raw: str) -> None:
        try:
            if len(raw) > self.app.max_body_bytes:
                raise InvalidRequest(
                    "This event is larger than the server accepts.", code="payload_too_large"
                )
            kind, req = await read_json(raw, read_event)
            if kind == "response.create":
                self.app.check_open()  # draining: no new turns; running ones finish or are cancelled
                self.app.check_rate(self.key, self.client_host)
                try:
                    self.queue.put_nowait(req)
                except asyncio.QueueFull:
                    raise RateLimited(
                        f"{self.queue.maxsize} responses are already waiting on this connection; wait for "
                        "one to finish, or open another connection.",
                        code="queue_full",
                    ) from None
            elif kind == "response.cancel":
                if self.current is not None:
                    self.current.cancel()
            else:
                raise InvalidRequest(f"Unknown event type '{kind}'.", param="type", code="unknown_event_type")
        except WhizError as exc:
            await self.send_error(exc)
        except Exception:  # a bug must cost this event, not the session
            log.exception("event failed")
            await self.send_error(WhizError("The server failed to handle this event."))

    async def _prefill(self, run: ResponseRun) -> None:
        """Drain a warm-up run whose answer was already sent."""
        try:
            async for _ in run.events():
                pass
        finally:
            run.cancel()  # a no-op once it finished; stops the prefill if the session closed

    async def _work(self) -> None:
        while True:
            req = await self.queue.get()
            try:
                await self._run(req)
            except WhizError as exc:
                await self.send_error(exc)
            except Exception:  # never let one bad turn end the session
                log.exception("turn failed")
                await self.send_error(WhizError("The server failed to run this response."))
            finally:
                self.current = None
                if self.state != "closed":
                    self.state = "idle"

    async def _run(self, req: ResponsesRequest) -> None:
        try:
            run = await self._respond(req)
        except WhizError:
            self._evict(req.previous_response_id)
            raise
        if run is not None and run.conversation is None:  # the turn failed or was cancelled
            assert run.response is not None
            self.gone[run.response["id"]] = ended_why(run.response)
            if run.response["status"] == "failed":
                self._evict(req.previous_response_id)
        while len(self.gone) > GONE_REMEMBERED:
            self.gone.popitem(last=False)

    def _evict(self, response_id: str | None) -> None:
        """Forget the connection's latest response, as the specification asks of a failed
        continuation: the client starts again from the full input, or from the stored copy."""
        if response_id is not None and self.latest is not None and self.latest[0] == response_id:
            self.latest = None
            self.gone[response_id] = EVICTED

    def _previous(self, response_id: str) -> Conversation:
        if self.latest is not None and self.latest[0] == response_id:
            return self.latest[1]
        why = self.gone.get(response_id)
        if why == EVICTED:
            # Evicted from the connection, but a stored response (store: true) still holds the
            # conversation as it was before the failed turn: the client may send that turn again.
            found = self.app.store.get(response_id, self.tenant)
            if found is not None and found[1] is not None:
                return found[1]
        if why is not None:
            raise not_continuable(response_id, why)
        raise InvalidRequest(
            f"Previous response '{response_id}' is not the latest response of this connection. "
            "Send the full input instead.",
            param="previous_response_id",
            code="previous_response_not_found",
        )

    async def _respond(self, req: ResponsesRequest) -> ResponseRun | None:
        """Run one turn and send its events; the run (None for a warm-up)."""
        if self.warming is not None:
            await self.warming  # the previous warm-up's prefill; the cache must hold it first
            self.warming = None
        previous = None if req.previous_response_id is None else self._previous(req.previous_response_id)
        service = self.app.responses
        turn = await service.prepare_async(req, previous, session=self.id, tenant=self.tenant)
        self.state = "running"
        self.current = run = service.start(turn)
        self.app.metrics.request("responses.ws")
        if not req.generate:
            events, conversation = service.acknowledge_warmup(turn)
            self.warming = asyncio.create_task(self._prefill(run))
            for event in events:
                await self.send(event)
            self.latest = (turn.id, conversation)
            if req.store:
                self.app.store.put(events[-1]["response"], conversation, self.tenant)
            return None
        async for event in run.events():
            await self.send(event)
        if run.conversation is not None:
            self.latest = (turn.id, run.conversation)
        if req.store:
            self.app.store.put(run.response, run.conversation, self.tenant)
        self.app.metrics.finished(run.response)
        return run
