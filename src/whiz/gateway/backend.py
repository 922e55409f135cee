"""The gateway: a `Backend` over OpenAI-compatible upstreams, with affinity, health and failover.

Upstreams are stateless: whiz keeps each conversation (the Responses API's `previous_response_id`
and the WebSocket session hold its messages) and sends the whole history every turn, to the
replica whose prefix cache holds it. When that replica fails before the turn produced anything,
the turn goes to the next replica at once and the client never knows. When it fails mid-response,
the response fails with `upstream_lost` and the conversation stays as it was before the turn, so
the client sends the same turn again and it runs, with the full history, on another replica: the
client sees at most one retried turn, and no turn is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from whiz.backend.types import BackendInfo, TextDelta, TurnRequest, TurnResult
from whiz.chat.messages import ToolCall
from whiz.engine.types import GenerationStats
from whiz.errors import InvalidRequest, WhizError
from whiz.gateway.errors import UpstreamError, UpstreamLost, UpstreamProtocolError
from whiz.gateway.health import HealthChecker
from whiz.gateway.router import Policy, Replica, Router
from whiz.gateway.upstream import Upstream
from whiz.gateway.wire import ChunkReader

log = logging.getLogger("whiz.gateway")

_END = object()
_CANCELLED = object()
QUEUE_CHUNKS = 256
"""Chunks read ahead of a slow client; past this the upstream's stream waits (TCP back-pressure)."""


def session_key(request: TurnRequest) -> str:
    """What pins a turn to a replica: the most specific session identity the request carries.

    A plain chat completion has none, so its conversation's opening (system prompt and first
    message) stands in: every turn of a conversation resends the same opening. Each is the
    tenant's own: two keys naming the same session are two sessions.
    """
    scope = f"{request.tenant}/" if request.tenant else ""
    if request.session:
        return f"session:{scope}{request.session}"
    if request.cache_key:
        return f"cache_key:{scope}{request.cache_key}"
    if request.chain:
        return f"chain:{scope}{request.chain}"
    head = [request.system or ""] + [m.content for m in request.messages[:1]]
    return f"head:{scope}" + hashlib.blake2b("\x00".join(head).encode(), digest_size=12).hexdigest()


class Gateway:
    """A `Backend` over one or more upstream replicas. Use as an async context manager."""

    def __init__(
        self,
        upstreams: list[Upstream],
        *,
        policy: Policy = "affinity",
        model_name: str | None = None,
        health_interval_s: float = 2.0,
        health_timeout_s: float = 2.0,
        max_candidates: int = 8,
        max_attempts: int = 3,
        single_tenant: bool = False,
    ):
        self.single_tenant = single_tenant
        """Every turn is one key's (a gateway with one API key and no gateway keys): no tenant's
        cache hits can be another's, so they are reported as the upstreams count them. Otherwise
        they are reported only from upstreams that keep tenants apart (`Upstream.keeps_tenants`)."""
        self.router = Router([Replica(u) for u in upstreams], policy=policy)
        self.max_candidates = max_candidates
        """The most candidates (`n`) of one request: each is a request to the upstream."""
        self.max_attempts = max_attempts
        """Replicas one turn tries before it fails: retries are bounded however many replicas there are."""
        self.health = HealthChecker(self.router, interval_s=health_interval_s, timeout_s=health_timeout_s)
        self.model_name = model_name
        self.retries = 0
        """Turns tried again on another replica before they produced anything."""
        self.lost = 0
        """Turns that failed mid-response (the client sends them again)."""
        self.closing: set[asyncio.Task] = set()
        """Upstream streams being closed (the loop keeps only weak references to tasks)."""
        self._task: asyncio.Task | None = None

    @property
    def info(self) -> BackendInfo:
        upstreams = [r.upstream for r in self.router.replicas]
        model = self.model_name or next((u.model for u in upstreams if u.model), None) or "whiz"
        windows = [u.n_ctx for u in upstreams if u.n_ctx]
        return BackendInfo(
            model=model, n_ctx=min(windows) if windows else None, max_candidates=self.max_candidates
        )

    @property
    def keeps_tenants(self) -> bool:
        """Whether every replica keeps tenants apart: only then does this gateway, as another
        gateway's upstream, say it kept the tenant a request named (`X-Whiz-Tenant-Kept`)."""
        return all(r.upstream.keeps_tenants for r in self.router.replicas)

    async def discover(self) -> None:
        """Ask every replica what it serves; one that does not answer starts out of rotation."""
        await self.health.check_all()

    async def __aenter__(self) -> Gateway:
        await self.discover()
        self._task = asyncio.create_task(self.health.run())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for replica in self.router.replicas:
            await replica.upstream.aclose()

    def start(self, request: TurnRequest) -> GatewayTurn:
        if request.continue_last:
            # Any replica may run the turn (failover), so every one must go on from the start.
            cannot = [r.name for r in self.router.replicas if not r.upstream.continues]
            if cannot:
                raise InvalidRequest(
                    f"continue_final_message: {', '.join(cannot)} cannot go on from a reply's start "
                    "(whiz and vLLM can); send the conversation without it.",
                    param="continue_final_message",
                )
        return GatewayTurn(self, request, session_key(request))

    def start_many(self, request: TurnRequest, n: int) -> list[GatewayTurn]:
        """`n` candidates as `n` requests, all to the session's replica (its prefix cache)."""
        if n > self.max_candidates:
            raise InvalidRequest(
                f"n is {n}, but this gateway sends at most {self.max_candidates} candidates upstream.",
                param="n",
            )
        return [self.start(request) for _ in range(n)]

    def count_tokens(self, text: str) -> int:
        # The upstreams tokenize; code runs about 3.5-4.5 characters a token, so this errs high.
        return len(text) // 3 + 1

    def status(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in self.router.replicas:
            label = '{replica="' + r.name.replace("\\", "\\\\").replace('"', '\\"') + '"}'
            out[f"replica_healthy{label}"] = int(r.healthy)
            out[f"replica_sessions{label}"] = r.sessions
            out[f"replica_in_flight{label}"] = r.in_flight
            out[f"replica_requests_total{label}"] = r.requests
            out[f"replica_errors_total{label}"] = r.errors
            out[f"replica_prompt_tokens_total{label}"] = r.prompt_tokens
            out[f"replica_cached_tokens_total{label}"] = r.cached_tokens
            hit = r.cached_tokens / r.prompt_tokens if r.prompt_tokens else 0.0
            out[f"replica_cache_hit_ratio{label}"] = round(hit, 4)
        out["gateway_sessions"] = self.router.sessions()
        out["gateway_failovers_total"] = self.router.failovers
        out["gateway_retries_total"] = self.retries
        out["gateway_lost_turns_total"] = self.lost
        return out


class GatewayTurn:
    """One turn through the gateway (a `BackendTurn`): routed, streamed, retried, cancellable."""

    def __init__(self, gateway: Gateway, request: TurnRequest, key: str):
        self.result: TurnResult | None = None
        self.prompt_tokens = 0  # upstreams count tokens; the gateway cannot before it runs
        self.basis: Any = None  # upstreams keep no state for a conversation
        self.key = key
        self._gateway = gateway
        self._request = request
        named = request.cache_key or request.session or request.chain
        # The upstream's session (whiz's slot, OpenAI's cache routing) is the tenant's own too.
        self._forward_key = f"{request.tenant}/{named}" if named and request.tenant else named
        self._replica: Replica | None = None
        self._response: httpx.Response | None = None
        self._kept = True
        """Whether the replica running the turn keeps its tenant apart (`Upstream.kept`)."""
        self._tried: list[str] = []
        self._last_error: UpstreamError | None = None
        self._cancelled = False
        self._queue: asyncio.Queue = asyncio.Queue(maxsize=QUEUE_CHUNKS)
        self._pump: asyncio.Task | None = None
        self._t0: float | None = None
        self._refused: WhizError | None = None

    @property
    def replica(self) -> str | None:
        """The replica running the turn now."""
        return self._replica.name if self._replica else None

    def progress(self) -> dict[str, int] | None:
        return None  # an upstream does not say how far its prefill has come

    def cancel(self) -> None:
        """Stop: the upstream stream is closed, which stops generation on the upstream."""
        if self._cancelled:
            return
        self._cancelled = True
        # A full queue has a reader that will see the flag before its next wait.
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(_CANCELLED)
        _stop(self._pump)

    async def open(self) -> None:
        if self._t0 is not None:  # opened already: a refusal stays a refusal
            if self._refused is not None:
                raise self._refused
            return
        self._t0 = time.perf_counter()
        try:
            await self._connect()
        except WhizError as exc:
            self._refused = exc
            raise

    async def _connect(self) -> None:
        """Find a replica that accepts the turn, trying each in rotation at most once."""
        router = self._gateway.router
        while not self._cancelled:
            if len(self._tried) >= self._gateway.max_attempts and self._last_error is not None:
                raise self._last_error
            try:
                replica = router.route(self.key, exclude=self._tried)
            except UpstreamError:
                if self._last_error is not None:
                    raise self._last_error from None  # the real reason beats "none left"
                raise
            if self._tried:
                self._gateway.retries += 1
            self._tried.append(replica.name)
            router.began(replica)
            try:
                upstream = replica.upstream
                self._response = await upstream.open(
                    upstream.body(self._request, self._forward_key),
                    upstream.tenant_headers(self._request.tenant),
                )
            except UpstreamError as exc:
                router.failed(replica, exc if exc.elsewhere else None)
                if not exc.elsewhere:
                    raise
                self._note_retry(replica, exc)
                continue
            except BaseException:
                router.abandoned(replica)
                raise
            self._replica = replica
            kept = upstream.kept(self._response, self._request.tenant)
            self._kept = kept or self._gateway.single_tenant
            return

    def _note_retry(self, replica: Replica, exc: UpstreamError) -> None:
        log.warning("turn failed on %s: %s", replica.name, exc.message)
        self._last_error = exc

    async def events(self) -> AsyncIterator[TextDelta | ToolCall]:
        try:
            await self.open()
            async for piece in self._attempts():
                yield piece
        finally:
            await self._close()

    async def _attempts(self) -> AsyncIterator[TextDelta | ToolCall]:
        router = self._gateway.router
        generate = self._request.generate
        while True:
            if self._cancelled or self._replica is None:
                self._finish(ChunkReader(self.replica or "", parse_tools=False), [], None, cancelled=True)
                return
            replica = self._replica
            reader = ChunkReader(replica.name, parse_tools=bool(self._request.tools))
            pieces: list[TextDelta | ToolCall] = []
            first_at: float | None = None
            try:
                async for piece in self._read(reader):
                    first_at = first_at or time.perf_counter()
                    pieces.append(piece)
                    if generate:
                        yield piece
            except UpstreamError as exc:
                self._replica = None
                await self._close()
                router.failed(replica, exc)
                if pieces and generate:
                    self._gateway.lost += 1
                    router.move(self.key, away_from=replica)  # the client's retry runs elsewhere
                    raise UpstreamLost(
                        f"{exc.message} The response was cut off; the conversation is as it was before "
                        "this turn: send the turn again and another replica will run it."
                    ) from None
                if not exc.elsewhere:
                    raise
                self._note_retry(replica, exc)
                await self._connect()
                continue
            stats = self._finish(reader, pieces, first_at, cancelled=self._cancelled)
            self._replica = None
            router.succeeded(replica, stats)
            return

    async def _read(self, reader: ChunkReader) -> AsyncIterator[TextDelta | ToolCall]:
        """The pieces of the current replica's stream; ends early on cancel."""
        assert self._response is not None and self._replica is not None
        self._queue = asyncio.Queue(maxsize=QUEUE_CHUNKS)
        if self._cancelled:
            return
        self._pump = asyncio.create_task(
            self._pump_chunks(self._replica.upstream, self._response, self._queue)
        )
        while not self._cancelled:
            item = await self._queue.get()
            if item is _END or item is _CANCELLED:
                break
            if isinstance(item, UpstreamError):
                raise item
            for piece in reader.feed(item):
                yield piece
        if not self._cancelled and reader.finish_reason is None:
            raise UpstreamLost(f"Upstream {reader.replica} closed the stream before the response finished.")
        for piece in reader.finish():
            yield piece

    @staticmethod
    async def _pump_chunks(upstream: Upstream, response: httpx.Response, queue: asyncio.Queue) -> None:
        """Read the upstream's stream into `queue`, so a cancel can stop the read at any moment.
        The response is closed by `_close`, once this has stopped."""
        try:
            async for chunk in upstream.chunks(response):
                # A full queue stops the read: the upstream waits, memory does not grow.
                await queue.put(chunk)
            await queue.put(_END)
        except UpstreamError as exc:
            await queue.put(exc)
        except Exception as exc:  # a bug here must fail one turn, not hang it
            log.exception("reading %s failed", upstream.name)
            await queue.put(UpstreamProtocolError(f"Upstream {upstream.name}: unreadable stream ({exc})."))

    def _finish(
        self, reader: ChunkReader, pieces: list, first_at: float | None, *, cancelled: bool
    ) -> GenerationStats:
        now = time.perf_counter()
        start = self._t0 or now
        ttft_ms = ((first_at or now) - start) * 1000
        decode_ms = (now - first_at) * 1000 if first_at else 0.0
        stats = reader.stats(ttft_ms=ttft_ms, decode_ms=decode_ms, pieces=len(pieces))
        if not self._kept:
            # A cache shared with other tenants: its hits are theirs to keep (a prefix oracle
            # otherwise), so this tenant is told, and /metrics counts, what a cold cache gives.
            stats.cached_tokens, stats.prefill_tokens = 0, stats.prompt_tokens
            stats.prefill_ms = ttft_ms
        text = "".join(p.text for p in pieces if isinstance(p, TextDelta))
        calls = [p for p in pieces if isinstance(p, ToolCall)]
        if cancelled:
            reason = "cancelled"
        elif reader.finish_reason == "length" and self._request.generate:
            reason = "length"
        else:
            reason = "stop"
        stats.finish_reason = reason  # type: ignore[assignment]
        if not self._request.generate:
            text, calls, stats.decode_tokens = "", [], 0
        self.prompt_tokens = stats.prompt_tokens
        self.result = TurnResult(text, calls, stats, reason, stats.decode_tokens)
        return stats

    async def _close(self) -> None:
        """Close the upstream stream now (a client gone, a cancel, an error): the upstream stops."""
        pump, self._pump = self._pump, None
        response, self._response = self._response, None
        if self._replica is not None:  # left mid-turn: the replica did nothing wrong
            replica, self._replica = self._replica, None
            self._gateway.router.abandoned(replica)
        _stop(pump)
        if pump is None and response is None:
            return
        # The close runs in a task of its own that nothing cancels, and this one only waits for it
        # (not `await closer`): Starlette cancels a stream whose client left again and again, and
        # a cancel landing inside the close leaves the connection checked out of the pool and
        # open, with the upstream generating for no one. Once the pool's 100 are gone that way,
        # every later turn waits forever (seen in `whiz bench soak --gateway`).
        closer = asyncio.create_task(_close_after(pump, response))
        self._gateway.closing.add(closer)
        closer.add_done_callback(self._gateway.closing.discard)
        await asyncio.wait([closer])


def _stop(pump: asyncio.Task | None) -> None:
    """Cancel a pump's read, once: a second cancel would land inside the close the first began."""
    if pump is not None and not pump.cancelling():
        pump.cancel()


async def _close_after(pump: asyncio.Task | None, response: httpx.Response | None) -> None:
    """Close `response` once `pump` has stopped reading it (a no-op if it is closed already)."""
    if pump is not None:
        await asyncio.wait([pump])
    if response is not None:
        await response.aclose()
