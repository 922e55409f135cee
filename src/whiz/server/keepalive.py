"""A stream that shows life while the model is silent.

A long prompt prefills for seconds, a minute on a slow model, before its first token; so can a
turn waiting for a slot. Clients and proxies with an idle timeout (the Codex CLI's, nginx's
`proxy_read_timeout`) give up on a stream that sends nothing that long. Each API's stream sends
its first event at once, and then, after every `KEEPALIVE_S` of silence, what its clients accept
as a sign of life and otherwise ignore:

- Responses (SSE and WebSocket): `response.in_progress` again, a standard event;
- Chat Completions SSE: an SSE comment line (`: keep-alive`), which SSE readers skip;
- Anthropic Messages SSE: a `ping` event, as Anthropic's API sends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

T = TypeVar("T")
U = TypeVar("U")

KEEPALIVE_S = 2.0
"""Longest silence on a stream before a keep-alive is sent."""


async def with_keepalive(
    items: AsyncIterator[T], beat: Callable[[], U], every_s: float = KEEPALIVE_S
) -> AsyncIterator[T | U]:
    """`items`, with `beat()` yielded after each `every_s` during which none came.

    The next item is awaited in a task that survives the wait's timeout (cancelling it would
    cancel the turn); leaving early cancels it, which ends `items` as a client that left would.
    """
    pending: asyncio.Future | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait({pending}, timeout=every_s)
            if not done:
                yield beat()
                continue
            finished, pending = pending, None
            try:
                item = finished.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                await pending
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(RuntimeError):
                await aclose()
