"""The default adapter: a whiz server over Responses WebSocket mode.

One connection per agent session. The server keeps the conversation of the connection's latest
response, so each call sends only the items added since (tool outputs, the next user message)
with `previous_response_id`, and the shared prefix is not prefilled again. When the server no
longer holds it (`previous_response_not_found`), or the conversation was rewritten, the whole
input is sent instead. A cancelled or failed response is never chained from: the next call names
the last one that completed, and sends the rest (the cancelled reply's words included) as new.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from whiz.agent.models.seam import Finished, ModelEvent, ModelRequest, ModelText, ModelToolCall, output_items
from whiz.client import ClientError, HttpClient, PreviousResponseNotFound, ResponsesSocket

UNCONTINUABLE = ("failed", "cancelled")
"""Statuses of a response the server will not continue (`previous_response_id` is refused)."""


class WhizModel:
    """A `ModelClient` over one `ResponsesSocket`. Open with `await WhizModel.open(url, ...)`."""

    def __init__(self, socket: ResponsesSocket, *, model: str | None = None, temperature: float = 0.0):
        self.socket = socket
        self.model = model
        self.temperature = temperature
        # What the server holds: the id of our latest response and the items it stands for.
        self._previous_id: str | None = None
        self._previous_items: list[dict[str, Any]] = []
        self._frame: tuple[str, Any] | None = None
        self._running = False
        self.context_window: int | None = None
        """Tokens one conversation may hold on the server (learnt at `open`; None: unknown)."""

    @classmethod
    async def open(
        cls, base_url: str, api_key: str | None = None, *, model: str | None = None, temperature: float = 0.0
    ) -> WhizModel:
        """Connect to the server's WebSocket mode; raises `whiz.client.ConnectError` with a reason."""
        client = cls(await ResponsesSocket.open(base_url, api_key), model=model, temperature=temperature)
        try:
            async with HttpClient(base_url, api_key, timeout_s=10) as http:
                client.context_window = await http.context_window(model)
        except ClientError:
            pass  # a server that does not list its window: the agent does not compact
        return client

    async def close(self) -> None:
        await self.socket.close()

    async def respond(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        frame = (request.instructions, request.tools)
        chained = (
            self._previous_id is not None
            and frame == self._frame
            and request.items[: len(self._previous_items)] == self._previous_items
        )
        new_items = request.items[len(self._previous_items) :] if chained else request.items
        try:
            async for event in self._create(request, new_items, self._previous_id if chained else None):
                yield event
        except PreviousResponseNotFound:
            # The server dropped our conversation (restart, eviction): send all of it.
            async for event in self._create(request, request.items, None):
                yield event

    async def _create(
        self, request: ModelRequest, items: list[dict[str, Any]], previous_id: str | None
    ) -> AsyncIterator[ModelEvent]:
        body: dict[str, Any] = {
            "input": items,
            "instructions": request.instructions,
            "temperature": self.temperature if request.temperature is None else request.temperature,
        }
        if previous_id is not None:
            body["previous_response_id"] = previous_id
        if self.model:
            body["model"] = self.model
        if request.tools:
            body["tools"] = request.tools
        if request.max_output_tokens:
            body["max_output_tokens"] = request.max_output_tokens
        if request.prediction:
            body["prediction"] = {"type": "content", "content": request.prediction}
        text, calls = "", []
        self._running = True
        try:
            async for event in self.socket.create(**body):
                kind = event.get("type")
                if kind == "response.output_text.delta":
                    text += event.get("delta", "")
                    yield ModelText(event.get("delta", ""))
                elif kind == "response.output_item.done" and event["item"].get("type") == "function_call":
                    item = event["item"]
                    call = ModelToolCall(
                        item.get("call_id") or item["id"], item["name"], item.get("arguments", "")
                    )
                    calls.append(call)
                    yield call
        finally:
            self._running = False
        response = self.socket.last.response if self.socket.last else None
        response = response or {}
        status = response.get("status") or "failed"
        items_out = output_items(text, calls)
        if response.get("id") and status not in UNCONTINUABLE:
            # A failed or cancelled response cannot be continued; the server still holds the one
            # before it, so the next call chains from that and sends what came after as new items.
            self._previous_id = response["id"]
            self._previous_items = request.items + items_out
            self._frame = (request.instructions, request.tools)
        error = (response.get("error") or {}).get("message") if status == "failed" else None
        yield Finished(status, items_out, response.get("usage") or {}, response.get("whiz") or {}, error)

    async def cancel(self) -> None:
        if self._running:
            await self.socket.cancel()
