"""The OpenAI routes: Responses over HTTP and WebSocket, Chat Completions, and the model list.

Each module of routes is a function of the server's state returning its routes (`openai_routes`
here, `messages_routes`, `codex_routes`, `completions_routes`, `probe_routes`, and the browser
app's from above); `create_app` puts them together and puts every one behind the key check.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from whiz.errors import NotFound, WhizError
from whiz.server.auth import checked_key, named_tenant
from whiz.server.browser import SUBPROTOCOL
from whiz.server.guards import refuse_socket
from whiz.server.http import ClientGone, run_to_end, until_disconnected
from whiz.server.keepalive import with_keepalive
from whiz.server.protocol import ChatRequest, CompactRequest, ResponsesRequest
from whiz.server.requests import read_request, session_header
from whiz.server.responses import stored_conversation
from whiz.server.state import ServerState
from whiz.server.websocket import Session

T = TypeVar("T")


KEEP_ALIVE_COMMENT = ": keep-alive\n\n"
"""An SSE comment: readers skip it, idle timers see bytes (see `keepalive.py`)."""


def sse(events: AsyncIterator[dict], *, named: bool) -> StreamingResponse:
    """Server-sent events; Responses events are named (their keep-alive is an event of their
    own), chat chunks end with [DONE] and are kept alive with comment lines."""

    async def body():
        async for ev in events if named else with_keepalive(events, lambda: None):
            if ev is None:
                yield KEEP_ALIVE_COMMENT
                continue
            head = f"event: {ev['type']}\n" if named else ""
            yield f"{head}data: {json.dumps(ev)}\n\n"
        if not named:
            yield "data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def openai_routes(state: ServerState) -> list[BaseRoute]:
    """`/v1/responses` (POST, GET by id, WebSocket), `/v1/chat/completions` and `/v1/models`."""

    async def responses_create(request: Request) -> Response:
        req, key, _ = await read_request(state, request, ResponsesRequest)
        tenant = state.tenant(key, request.headers)
        previous = stored_conversation(state.store, req.previous_response_id, tenant)
        turn = await state.responses.prepare_async(
            req, previous, session=session_header(request.headers), tenant=tenant
        )
        run = state.responses.start(turn)
        state.metrics.request("responses.http")

        async def events():
            async for ev in run.events():
                yield ev
            if req.store and run.response is not None:
                # A failed one too, so that reading it or continuing from it says what happened.
                state.store.put(run.response, run.conversation, tenant)
            state.metrics.finished(run.response)

        if req.stream:
            return sse(events(), named=True)

        try:
            await run_to_end(request, events(), run.cancel)
        except ClientGone:
            return Response(status_code=499)  # nginx's "client closed request"; no one reads it
        if run.error is not None:
            raise run.error  # nothing was sent yet, so the client gets the error's own status
        return JSONResponse(run.response)

    async def responses_compact(request: Request) -> Response:
        req, key, _ = await read_request(state, request, CompactRequest)
        tenant = state.tenant(key, request.headers)
        previous = stored_conversation(state.store, req.previous_response_id, tenant)
        state.metrics.request("responses.compact")
        work = state.compaction.compact(req, previous, session=session_header(request.headers), tenant=tenant)
        try:
            return JSONResponse(await until_disconnected(request, work))
        except ClientGone:
            return Response(status_code=499)

    async def responses_get(request: Request) -> Response:
        found = state.store.get(
            request.path_params["response_id"], state.tenant(checked_key(request), request.headers)
        )
        if found is None:
            raise NotFound(
                f"No response with id '{request.path_params['response_id']}'.", param="response_id"
            )
        return JSONResponse(found[0])

    async def chat_completions(request: Request) -> Response:
        req, key, _ = await read_request(state, request, ChatRequest)
        state.metrics.request("chat")
        session = session_header(request.headers)
        tenant = state.tenant(key, request.headers)
        if req.stream:
            # A refusal gets its HTTP status, not a 200 stream.
            turns = await state.chat.open(req, session, tenant)
            return sse(state.chat.stream(req, turns), named=False)
        try:
            out = await until_disconnected(request, state.chat.complete(req, session, tenant))
        except ClientGone:
            return Response(status_code=499)
        state.metrics.finished(out)
        return JSONResponse(out)

    async def models(request: Request) -> Response:
        entry = {"id": state.model_name, "object": "model", "created": 0, "owned_by": "whiz"}
        if state.backend.info.n_ctx:
            entry["context_window"] = state.backend.info.n_ctx
        return JSONResponse({"object": "list", "data": [entry]})

    async def responses_socket(ws: WebSocket) -> None:
        offered = ws.scope.get("subprotocols") or []
        await ws.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offered else None)
        key = checked_key(ws)
        who = state.client_key(key, ws.client.host if ws.client else None)
        try:
            named_tenant(ws.headers)  # a malformed one is refused here, with the other refusals
            state.open_socket(who)
        except WhizError as exc:
            await refuse_socket(ws, exc)
            return
        session = Session(ws, state, key, session_id=session_header(ws.headers))
        state.metrics.ws_sessions += 1
        state.sessions.add(session)
        try:
            await session.serve()
        finally:
            state.sessions.discard(session)
            state.metrics.ws_sessions -= 1
            state.close_socket(who)

    return [
        Route("/v1/responses", responses_create, methods=["POST"]),
        Route("/v1/responses/compact", responses_compact, methods=["POST"]),
        Route("/v1/responses/{response_id}", responses_get, methods=["GET"]),
        WebSocketRoute("/v1/responses", responses_socket),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
    ]
