"""Everything one server instance holds; built by `create_app`, never a module global."""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from starlette.requests import Request

from whiz.config import ServeSettings
from whiz.engine.types import SamplingParams
from whiz.errors import RateLimited
from whiz.seams import Backend
from whiz.server.auth import KeyCheck, RateLimiter, named_tenant
from whiz.server.browser import BrowserGuard, is_loopback
from whiz.server.chat import ChatService
from whiz.server.compaction import CompactionService
from whiz.server.http import Unavailable, read_body
from whiz.server.metrics import Metrics
from whiz.server.protocol import TurnDefaults
from whiz.server.responses import ResponsesService, ResponseStore

if TYPE_CHECKING:
    from whiz.seams import Busy

WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def allowed_hosts(settings: ServeSettings) -> set[str]:
    """Host names the server answers under (loopback names, and address literals on a non-loopback
    bind, always pass: see `BrowserGuard`).

    A wildcard bind is reached by this machine's own name too; any other name (a rebinding
    attacker's) is refused unless `allowed_hosts` names it.
    """
    hosts = {settings.host, *settings.allowed_hosts}
    if settings.host in WILDCARD_HOSTS:
        hosts.add(socket.gethostname())
    return {h.lower() for h in hosts if h}


class ServerState:
    def __init__(self, backend: Backend, settings: ServeSettings):
        self.backend = backend
        self.settings = settings
        self.model_name = settings.model_name or backend.info.model
        sampling = SamplingParams(
            temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k
        )
        self.defaults = TurnDefaults(
            self.model_name, sampling, settings.max_output_tokens_default, tool_grammar=settings.tool_grammar
        )
        self.responses = ResponsesService(backend, self.defaults)
        self.compaction = CompactionService(backend, self.defaults)
        self.chat = ChatService(backend, self.defaults, max_n=settings.max_n)
        self.store = ResponseStore(
            settings.stored_responses,
            max_bytes=int(settings.stored_responses_mb * 1024 * 1024),
            ttl_s=settings.stored_response_ttl_s,
        )
        self.metrics = Metrics()
        self.keys = KeyCheck(settings.api_keys, settings.gateway_keys)
        self.limiter = RateLimiter(settings.rate_limit_rpm)
        self.max_body_bytes = int(settings.max_body_mb * 1024 * 1024)
        self.browser = BrowserGuard(
            loopback_only=is_loopback(settings.host),
            hosts=allowed_hosts(settings),
            origins=settings.allowed_origins,
        )
        self.draining = False
        """Set on SIGTERM: new requests get a 503 while running ones finish or are cancelled."""
        self.in_flight = 0
        """HTTP requests being answered (a stream counts until its end)."""
        self.sessions: set[Busy] = set()
        """Open WebSocket sessions."""
        self.ws_open: Counter[str | None] = Counter()
        """Open WebSocket sessions per tenant key (see `ws_key`)."""
        self.closers: list[Callable[[], Awaitable[None]]] = []
        """What must stop before the app does (a running heal of the browser app), in order."""

    def tenant(self, key: str | None, headers: Mapping[str, str]) -> str | None:
        """Whose request this is (call after `keys.check(key)`): see `KeyCheck.tenant`."""
        return self.keys.tenant(key, named_tenant(headers))

    def client_key(
        self, key: str | None, client_host: str | None, headers: Mapping[str, str] | None = None
    ) -> str:
        """Whom limits count against: a valid key when keys are set, else the client's address
        (any bearer string would otherwise be a fresh bucket). A gateway key's requests count
        against the tenant they name (`headers`), so one of its clients cannot spend the others'."""
        if not self.keys.keys:
            return f"addr:{client_host}"
        named = named_tenant(headers) if headers is not None else None
        return f"key:{self.keys.tenant(key, named)}"

    def check_rate(
        self, key: str | None, client_host: str | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        """Call after `keys.check(key)`: only validated keys get a bucket of their own."""
        self.limiter.hit(self.client_key(key, client_host, headers))

    async def read_body(self, request: Request) -> bytes:
        """A request's body within this server's size and time limits: the one way routes read one."""
        return await read_body(request, self.max_body_bytes, self.settings.body_timeout_s)

    def busy(self) -> bool:
        """Whether a request or a WebSocket turn is running: a drain waits for none."""
        return self.in_flight > 0 or any(s.busy() for s in self.sessions)

    def check_open(self) -> None:
        if self.draining:
            raise Unavailable("The server is shutting down; retry on another server or later.")

    def open_socket(self, who: str) -> None:
        """Count a WebSocket session in, or refuse it when this client or the server has too many."""
        self.check_open()
        if sum(self.ws_open.values()) >= self.settings.max_ws_sessions:
            raise Unavailable(
                f"The server holds its most WebSocket sessions ({self.settings.max_ws_sessions}); "
                "retry later.",
                code="too_many_connections",
            )
        if self.ws_open[who] >= self.settings.max_ws_sessions_per_key:
            raise RateLimited(
                f"This client holds {self.ws_open[who]} WebSocket sessions, the most allowed; "
                "close one first.",
                code="too_many_connections",
            )
        self.ws_open[who] += 1

    def close_socket(self, who: str) -> None:
        self.ws_open[who] -= 1
        if self.ws_open[who] <= 0:
            del self.ws_open[who]
