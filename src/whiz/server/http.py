"""An HTTP request's lifetime, bounded: its body is counted as it arrives, and its work stops when
the client goes away.

A body sent chunked has no Content-Length, so the size check must happen while reading, not
after: otherwise a client can make the server buffer gigabytes before it says no. A body that
trickles in holds a connection, so it has a deadline too. And a client that gives up on a
non-streaming request must not leave the engine generating for it.

Every route that takes a body reads it with `read_body`, through `ServerState.read_body`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request

from whiz.errors import PayloadTooLarge, WhizError

T = TypeVar("T")


class Unavailable(WhizError):
    """The server cannot take this request now (shutting down, or at its connection limit)."""

    status = 503
    type = "server_error"
    code = "server_unavailable"


class RequestTimeout(WhizError):
    """The request's body did not arrive in time (a slow or stalled client)."""

    status = 408
    type = "invalid_request_error"
    code = "request_timeout"


class ClientGone(Exception):
    """The client disconnected before its answer was ready; there is no one to answer."""


async def read_body(request: Request, limit_bytes: int, timeout_s: float | None = None) -> bytes:
    """The body, refused with 413 as soon as it passes `limit_bytes` (declared or counted), and
    with 408 when it has not all arrived `timeout_s` after the headers."""
    too_large = PayloadTooLarge(f"The body is larger than {limit_bytes / 1024 / 1024:g} MB.")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit_bytes:
        raise too_large
    parts: list[bytes] = []
    size = 0

    async def read() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit_bytes:
                raise too_large  # stop reading: the rest is never buffered
            parts.append(chunk)

    try:
        async with asyncio.timeout(timeout_s):
            await read()
    except TimeoutError:
        raise RequestTimeout(
            f"The request's body did not arrive within {timeout_s:g} s; send it whole, then wait."
        ) from None
    return b"".join(parts)


async def until_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it if the client disconnects first (then raise ClientGone).

    The body has been read, so the next ASGI message is `http.disconnect`: it arrives when the
    client closes the connection, or once the response is sent.
    """
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.create_task(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        raise ClientGone()
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()  # its own cleanup cancels the backend turns within a decode step
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def run_to_end(request: Request, events: AsyncIterator[Any], cancel: Callable[[], None]) -> None:
    """Read a turn's events to the end for a non-streamed answer, stopping the turn if the client
    leaves first (then raise ClientGone): the engine never works for no one."""

    async def drain() -> None:
        try:
            async for _ in events:
                pass
        finally:
            cancel()  # a no-op once finished

    await until_disconnected(request, drain())
