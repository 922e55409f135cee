"""Reading an API request, the one way every route does: the body (within the server's limits,
decoded and validated), the key it came with, and the session it names.

One reader for every API, so a bound added here (a size, a rate, the drain) holds on all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from pydantic import BaseModel
from starlette.requests import Request

from whiz.server.auth import checked_key
from whiz.server.protocol import parse, read_json

if TYPE_CHECKING:
    from whiz.server.state import ServerState

T = TypeVar("T", bound=BaseModel)

SESSION_HEADERS = ("x-session-id", "session_id", "session-id", "x-claude-code-session-id")
"""Headers a client names its session with (the Codex CLI's, OpenCode's, Claude Code's): turns of
one session share a warm slot, stay on one replica, and a newer keystroke cancels an older one."""


class ApiRequest(NamedTuple):
    body: BaseModel
    key: str | None
    size: int
    """The body's length in bytes: large ones are rendered and tokenized off the event loop."""


def session_header(headers: Mapping[str, str]) -> str | None:
    """The session a request names, by the first of `SESSION_HEADERS` it carries."""
    return next((headers[h] for h in SESSION_HEADERS if headers.get(h)), None)


async def read_request(state: ServerState, request: Request, model: type[T]) -> ApiRequest:
    """A POST body, rate-limited, read within the size and time limits, decoded and validated as
    `model` (the first problem is a 400 naming its parameter), with the key the request was let in
    with (checked before the route: `guards.require_keys`). A draining server refuses it first."""
    state.check_open()
    key = checked_key(request)
    state.check_rate(key, request.client.host if request.client else None, request.headers)
    raw = await state.read_body(request)
    return ApiRequest(await read_json(raw, lambda data: parse(model, data)), key, len(raw))
