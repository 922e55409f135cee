"""Where the fast and deep models answer, and reaching them: a server that answers, or one started
in this process when none does (the agent then talks to it through the client like any other).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from whiz.client import ConnectError, HttpClient, ResponseError
from whiz.errors import WhizError
from whiz.models.store import default_home
from whiz.server.background import IDLE_EXIT_S, BackgroundServers

if TYPE_CHECKING:
    from whiz.server.inprocess import InProcessServer

DEFAULT_BASE_URL = "http://127.0.0.1:8321"
DEFAULT_MODEL = "qwen2.5-coder-0.5b"
DEEP_LOCAL_MODEL = "qwen2.5-coder-1.5b"
DEEP_DRAFT_MODEL = "qwen2.5-coder-0.5b"


def default_base_url() -> str:
    """Where to look for a server when no URL is given: `$WHIZ_BASE_URL`, else port 8321 here."""
    return os.environ.get("WHIZ_BASE_URL") or DEFAULT_BASE_URL


class SetupError(WhizError):
    """The agent could not start: no server, a refused key, an unknown session. One line, for people."""


@dataclass
class ModelSettings:
    """Where a model answers."""

    base_url: str | None = None
    """The server; None: the default URL (`$WHIZ_BASE_URL` or port 8321), or a server started in
    this process when nothing answers there. An explicit URL that does not answer is an error."""
    api_key: str | None = None
    """Bearer key for that server."""
    model: str | None = None
    """The model id to ask for (or to load, when whiz starts its own server)."""


@dataclass
class FastSettings(ModelSettings):
    """Where the fast model is: as `whiz exec` finds it (a server at base_url, or whiz's own)."""

    in_process: bool = False
    """With no server at the default URL, load the model in this process (for this command only)
    instead of using, or starting, the warm background server."""


@dataclass
class DeepSettings(ModelSettings):
    """Where the deep model is: any OpenAI-compatible server at `base_url` (its Chat Completions are
    used), or, with no `base_url`, `local_model` served by whiz in this process."""

    local_model: str = DEEP_LOCAL_MODEL
    draft_model: str | None = DEEP_DRAFT_MODEL
    """Drafts tokens for `local_model` (same tokenizer); output is unchanged, only faster."""
    kv_budget_mb: int = 1536
    slots: int = 8


@dataclass
class Reached:
    """A server that answers for a model, as `ensure_server` found or started it."""

    url: str
    model: str | None
    """The model id to ask for; None: the server's own (one whiz started serves only that)."""
    where: str
    """Where it is, for people: the URL, "in the background", or "in this process"."""
    server: InProcessServer | None = None
    """A server started in this process, to stop when done."""


async def ensure_server(fast: FastSettings, notice: Callable[[str], None]) -> Reached:
    """The configured server if it answers; else, when the URL was the default, the background
    server for the model (started now if none runs: it outlives this command and serves the next
    one warm), or with `in_process` one started in this process. Raises `SetupError` with a
    one-line reason."""
    url = fast.base_url or default_base_url()
    try:
        await probe(url, fast.api_key)
        return Reached(url, fast.model, url)
    except ConnectError as exc:
        if fast.base_url is not None:
            raise SetupError(f"no whiz server answers at {url} ({_reason(exc)})") from None
    name = fast.model or DEFAULT_MODEL
    if not fast.in_process:
        servers = BackgroundServers(default_home())
        running = await asyncio.to_thread(servers.find, name)
        if running is None:
            notice(
                f"no whiz server at {url}; starting {name} in the background (it stays warm for the next "
                f"command and exits after {IDLE_EXIT_S // 60} idle minutes; `whiz serve stop` ends it)"
            )
            try:
                running = await asyncio.to_thread(servers.start, name)
            except WhizError as exc:
                raise SetupError(f"could not start a background server with {name}: {exc.message}") from None
        return Reached(running.url, None, f"in the background at {running.url}")
    from whiz.config import ServeSettings
    from whiz.server.inprocess import InProcessServer

    notice(f"no whiz server at {url}; starting {name} in this process")
    server = InProcessServer(ServeSettings(model=name, temperature=0))
    try:
        return Reached(await asyncio.to_thread(server.start), None, "in this process", server)
    except WhizError as exc:
        raise SetupError(f"could not start a server with {name}: {exc.message}") from None


async def probe(url: str, api_key: str | None) -> None:
    """Ask the server for its models: a missing server raises `ConnectError`, a bad key `SetupError`."""
    try:
        async with HttpClient(url, api_key, timeout_s=5.0) as http:
            await http.models()
    except ValueError as exc:  # not a URL
        raise SetupError(str(exc)) from None
    except ResponseError as exc:
        if exc.status in (401, 403):
            raise SetupError(f"the server at {url} refused the API key ({exc.message})") from None
        raise SetupError(f"the server at {url} answered with an error: {exc.message}") from None


def _reason(exc: ConnectError) -> str:
    text = exc.message
    return text.split(": ", 1)[1] if ": " in text else text


async def probe_upstream(url: str, api_key: str | None) -> None:
    """Check that an OpenAI-compatible server answers; `SetupError` with the reason if not."""
    try:
        await probe(url, api_key)
    except ConnectError as exc:
        raise SetupError(f"no deep model answers at {url} ({exc.message})") from None
