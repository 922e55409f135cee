"""Everything one server instance holds; built by `create_app`, never a module global."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from whiz.config import ServeSettings
from whiz.engine.types import SamplingParams
from whiz.seams import Backend
from whiz.server.auth import KeyCheck, RateLimiter
from whiz.server.browser import BrowserGuard, is_loopback
from whiz.server.chat import ChatService
from whiz.server.metrics import Metrics
from whiz.server.responses import ResponsesService, ResponseStore


class ServerState:
    def __init__(self, backend: Backend, settings: ServeSettings):
        self.backend = backend
        self.settings = settings
        self.model_name = settings.model_name or backend.info.model
        defaults = SamplingParams(
            temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k
        )
        self.responses = ResponsesService(backend, model_name=self.model_name, defaults=defaults)
        self.chat = ChatService(backend, model_name=self.model_name, defaults=defaults)
        self.store = ResponseStore(settings.stored_responses)
        self.metrics = Metrics()
        self.keys = KeyCheck(settings.api_keys)
        self.limiter = RateLimiter(settings.rate_limit_rpm)
        self.max_body_bytes = int(settings.max_body_mb * 1024 * 1024)
        self.browser = BrowserGuard(loopback_only=is_loopback(settings.host))
        self.closers: list[Callable[[], Awaitable[None]]] = []
        """What must stop before the app does (a running heal of the browser app), in order."""

    def check_rate(self, key: str | None) -> None:
        self.limiter.hit(key)
