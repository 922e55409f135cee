"""A tiny Responses WebSocket-mode server for client tests, until tests run against the real one.

It echoes the input back as text, one delta per word, and answers a few magic inputs with the
errors the real server sends.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import ServerConnection, serve


class FakeResponsesServer:
    """Records what clients sent (`received`, `headers`) and replies like WebSocket mode."""

    def __init__(self, *, websocket: bool = True):
        self.websocket = websocket
        self.received: list[dict[str, Any]] = []
        self.headers: list[Any] = []
        self._count = 0

    @asynccontextmanager
    async def running(self):
        async with serve(self._handle, "127.0.0.1", 0, process_request=self._check) as server:
            port = server.sockets[0].getsockname()[1]
            yield f"http://127.0.0.1:{port}"

    def _check(self, connection: ServerConnection, request):
        self.headers.append(request.headers)
        if not self.websocket:
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        cancelled = asyncio.Event()
        async for frame in ws:
            event = json.loads(frame)
            self.received.append(event)
            if event["type"] == "response.cancel":
                cancelled.set()
            elif event["type"] == "response.create":
                cancelled.clear()
                asyncio.create_task(self._respond(ws, event, cancelled))

    async def _respond(self, ws: ServerConnection, create: dict[str, Any], cancelled: asyncio.Event) -> None:
        seq = 0

        async def send(event: dict[str, Any]) -> None:
            nonlocal seq
            await ws.send(json.dumps({**event, "sequence_number": seq}))
            seq += 1

        text = create["input"] if isinstance(create["input"], str) else create["input"][-1]["content"]
        if text == "bad":
            error = {
                "type": "invalid_request_error",
                "code": "invalid_value",
                "message": "no",
                "param": "input",
            }
            await send({"type": "error", "status": 400, "error": error})
            return
        if create.get("previous_response_id") == "resp_stale":
            error = {
                "type": "invalid_request_error",
                "code": "previous_response_not_found",
                "message": "gone",
            }
            await send({"type": "error", "status": 400, "error": error})
            return
        self._count += 1
        response = {"id": f"resp_{self._count}", "object": "response", "status": "in_progress", "output": []}
        await send({"type": "response.created", "response": response})
        await send({"type": "response.in_progress", "response": response})
        words = [] if create.get("generate") is False else text.split()
        status = "completed"
        for word in words:
            if cancelled.is_set():
                status = "cancelled"
                break
            await send({"type": "response.output_text.delta", "delta": word + " "})
            await asyncio.sleep(create.get("delay_s", 0))
        done = {**response, "status": status, "whiz": {"ttft_ms": 1.5}}
        await send({"type": "response.completed", "response": done})
