"""The client side of Responses WebSocket mode: one persistent connection, one response at a time.

    async with ResponsesSocket.connect("http://127.0.0.1:8321", api_key=key) as sock:
        async for event in sock.create(model="m", input="hi"):
            ...
        turn = await sock.run(input=[user("more")], previous_response_id=sock.last.id)

The connection is the session: the server keeps the conversation's KV cache for it, so each later
turn sends only its new items with `previous_response_id`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from whiz.client.errors import (
    ClientTimeout,
    ConnectError,
    ConnectionLost,
    ProtocolError,
    ResponseError,
    ResponseFailed,
    WebSocketUnsupported,
)
from whiz.client.turn import TERMINAL_EVENTS, Exchange
from whiz.client.urls import responses_ws_url


class ResponsesSocket:
    """One open WebSocket-mode connection. Use `connect()` (a context manager) or `open()`."""

    def __init__(self, ws: ClientConnection, url: str, *, recv_timeout_s: float | None):
        self.url = url
        self.last: Exchange | None = None
        self._ws = ws
        self._recv_timeout_s = recv_timeout_s
        # True when a caller stopped reading a response early; its remaining events must be read
        # off the socket before the next response's events can be told apart.
        self._unfinished = False

    @classmethod
    async def open(
        cls,
        base_url: str,
        api_key: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        open_timeout_s: float = 10.0,
        recv_timeout_s: float | None = 600.0,
    ) -> ResponsesSocket:
        """Connect to `<base_url>/v1/responses`; raises `ConnectError` with a one-line reason."""
        url = responses_ws_url(base_url)
        extra = dict(headers or {})
        if api_key:
            extra["Authorization"] = f"Bearer {api_key}"
        try:
            # No compression (as the openai SDK): events are small and latency is the point.
            ws = await ws_connect(
                url, additional_headers=extra, open_timeout=open_timeout_s, max_size=None, compression=None
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                raise ConnectError(
                    f"{url} refused the WebSocket (HTTP {status}): "
                    "check the API key, or the server has no WebSocket mode"
                ) from None
            raise WebSocketUnsupported(
                f"{url} answered HTTP {status}, not a WebSocket upgrade: the server has no WebSocket mode"
            ) from None
        except (InvalidHandshake, InvalidURI) as exc:
            raise WebSocketUnsupported(f"{url}: WebSocket handshake failed ({exc})") from None
        except TimeoutError:
            raise ConnectError(f"cannot connect to {url}: no answer within {open_timeout_s:g}s") from None
        except OSError as exc:
            if isinstance(exc, ConnectionRefusedError):
                reason = "connection refused"
            else:
                reason = exc.strerror or str(exc) or type(exc).__name__
            raise ConnectError(f"cannot connect to {url}: {reason.lower()} (is the server up?)") from None
        return cls(ws, url, recv_timeout_s=recv_timeout_s)

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, base_url: str, api_key: str | None = None, **options: Any
    ) -> AsyncIterator[ResponsesSocket]:
        """`async with ResponsesSocket.connect(url) as sock:`; closes the socket on exit."""
        sock = await cls.open(base_url, api_key, **options)
        try:
            yield sock
        finally:
            await sock.close()

    async def close(self) -> None:
        await self._ws.close()

    async def create(
        self,
        *,
        input: str | list[dict[str, Any]],
        previous_response_id: str | None = None,
        generate: bool = True,
        **fields: Any,
    ) -> AsyncIterator[dict[str, Any]]:
        """Send `response.create` and yield its events until the terminal one.

        `response.completed`, `.failed` and `.incomplete` are yielded and end the iteration; an
        `error` event raises `ResponseError` instead. The finished turn is kept in `self.last`.
        """
        if self._unfinished:
            # The caller stopped reading the previous response (one response at a time per
            # connection, so it is abandoned): read its rest so its events can't be taken for ours.
            await self._skip_to_terminal()
        body: dict[str, Any] = {"type": "response.create", "input": input, **fields}
        if previous_response_id is not None:
            body["previous_response_id"] = previous_response_id
        if not generate:
            body["generate"] = False
        self.last = turn = Exchange()
        self._unfinished = True
        await self._send(body)
        while self._unfinished:
            event = await self._recv()
            turn.observe(event)
            if event.get("type") in TERMINAL_EVENTS:
                self._unfinished = False
            if event.get("type") == "error":
                raise ResponseError.from_error(event.get("error") or {}, event.get("status"))
            yield event

    async def run(self, **request: Any) -> Exchange:
        """Send one `response.create` and read it to the end; raises `ResponseFailed` if it failed."""
        async for _ in self.create(**request):
            pass
        assert self.last is not None
        if self.last.status == "failed":
            error = (self.last.response or {}).get("error") or {}
            raise ResponseFailed(error.get("message") or "the response failed", code=error.get("code"))
        return self.last

    async def cancel(self) -> None:
        """Ask the server to stop the running response; it then ends with status `cancelled`."""
        await self._send({"type": "response.cancel"})

    async def _skip_to_terminal(self) -> None:
        while True:
            event = await self._recv()
            if event.get("type") in TERMINAL_EVENTS:
                self._unfinished = False
                return

    async def _send(self, body: dict[str, Any]) -> None:
        try:
            await self._ws.send(json.dumps(body))
        except ConnectionClosed as exc:
            raise ConnectionLost(f"{self.url}: connection closed ({_close_reason(exc)})") from None

    async def _recv(self) -> dict[str, Any]:
        try:
            frame = await asyncio.wait_for(self._ws.recv(), self._recv_timeout_s)
        except ConnectionClosed as exc:
            raise ConnectionLost(
                f"{self.url}: connection closed before the response finished ({_close_reason(exc)})"
            ) from None
        except TimeoutError:
            raise ClientTimeout(f"{self.url}: no event for {self._recv_timeout_s:g}s") from None
        if isinstance(frame, bytes):
            raise ProtocolError(f"{self.url}: unexpected binary frame")
        try:
            event = json.loads(frame)
        except json.JSONDecodeError:
            raise ProtocolError(f"{self.url}: event is not JSON: {frame[:200]!r}") from None
        if not isinstance(event, dict):
            raise ProtocolError(f"{self.url}: event is not a JSON object: {frame[:200]!r}")
        return event


def _close_reason(exc: ConnectionClosed) -> str:
    close = exc.rcvd or exc.sent
    if close is None:
        return "no close frame"
    return f"code {close.code}" + (f": {close.reason}" if close.reason else "")
