"""The HTTP side of a whiz (or any OpenAI-compatible) server: Responses and chat completions.

The WebSocket client is the fast path; this one exists for servers and proxies without WebSocket
mode, for the fallback a client needs on `previous_response_not_found`, and for benchmarks that
compare the two. Errors are the same types as the socket's.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from whiz.client.errors import ConnectError, ProtocolError, ResponseError
from whiz.client.turn import Exchange
from whiz.client.urls import api_base


class HttpClient:
    """An async client for `<base>/v1/...`; keeps one connection pool, so reuse it."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout_s: float = 600.0):
        self.base = api_base(base_url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # A plain-http server needs no certificate store, and loading one costs ~40 ms per client on
        # a small CPU: a good part of a warm `whiz exec`'s start. Redirects are not followed, so no
        # request of this client reaches an https URL unverified.
        tls = self.base.startswith("https://")
        self._http = httpx.AsyncClient(base_url=self.base, headers=headers, timeout=timeout_s, verify=tls)

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def models(self) -> list[str]:
        """The ids `GET /v1/models` lists."""
        response = await self._request("GET", "/models")
        return [m["id"] for m in response.json().get("data", [])]

    async def context_window(self, model: str | None = None) -> int | None:
        """The context window `GET /v1/models` gives `model` (or the first model), in tokens; None
        when the server does not say (whiz says `context_window`, vLLM `max_model_len`)."""
        entries = (await self._request("GET", "/models")).json().get("data") or []
        entry = next((e for e in entries if e.get("id") == model), entries[0] if entries else {})
        window = entry.get("context_window") or entry.get("max_model_len")
        return window if isinstance(window, int) and window > 0 else None

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST a JSON body and return the JSON answer; an error answer raises `ResponseError`."""
        return (await self._request("POST", path, json=body)).json()

    async def stream(self, path: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """POST with `stream: true` and yield each server-sent event's JSON data until `[DONE]` or EOF."""
        url = self.base + path
        try:
            async with self._http.stream("POST", path, json={**body, "stream": True}) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _error_from(response)
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    try:
                        yield json.loads(data)
                    except json.JSONDecodeError:
                        raise ProtocolError(f"{url}: server-sent event is not JSON: {data[:200]!r}") from None
        except httpx.TransportError as exc:
            raise ConnectError(f"cannot reach {url}: {_reason(exc)}") from None

    async def responses_turn(self, body: dict[str, Any], *, stream: bool = True) -> Exchange:
        """One `POST /v1/responses`; an `error` event in the stream raises `ResponseError`."""
        turn = Exchange()
        if not stream:
            turn.response = await self.post("/responses", {**body, "stream": False})
            turn.finished_at = time.perf_counter()
            return turn
        async for event in self.stream("/responses", body):
            turn.observe(event)
            if event.get("type") == "error":
                raise ResponseError.from_error(event.get("error") or {}, event.get("status"))
        return turn

    async def chat_turn(self, body: dict[str, Any]) -> Exchange:
        """One streamed `POST /v1/chat/completions`, asking for usage in the last chunk."""
        turn = Exchange()
        request = {**body, "stream_options": {"include_usage": True}}
        async for chunk in self.stream("/chat/completions", request):
            if "error" in chunk and not chunk.get("choices"):
                raise ResponseError.from_error(chunk["error"] or {})
            turn.observe_chunk(chunk)
        return turn

    async def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise ConnectError(f"cannot reach {self.base + path}: {_reason(exc)}") from None
        if response.status_code >= 400:
            raise _error_from(response)
        return response


def _error_from(response: httpx.Response) -> ResponseError:
    try:
        error = response.json().get("error")
    except (json.JSONDecodeError, AttributeError):
        error = None
    if not isinstance(error, dict):
        error = {
            "message": f"HTTP {response.status_code} from {response.url}: {response.text[:200]}",
            "code": f"http_{response.status_code}",
        }
    return ResponseError.from_error(error, response.status_code)


def _reason(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "connection refused (is the server running?)"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    return str(exc) or type(exc).__name__
