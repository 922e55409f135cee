"""One error hierarchy for whiz, and its mapping to OpenAI-style error objects.

Every error a client can see carries an HTTP status, an OpenAI `type`, a stable `code` and,
where it applies, the `param` at fault (`WhizError.to_dict`, the one wire shape, for HTTP and
WebSocket alike; `whiz.server.guards.error_response` sends it over HTTP).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def did_you_mean(word: str, known: Iterable[str], *, or_list: bool = False) -> str:
    """The hint after an unknown name in a config file: " (did you mean 'x'?)" for a close one;
    with `or_list`, else every known name; else nothing."""
    import difflib  # only when a config file has a mistake: kept out of every command's start

    known = list(known)
    like = difflib.get_close_matches(word, known, n=1)
    if like:
        return f" (did you mean '{like[0]}'?)"
    return f" (the keys are: {', '.join(known)})" if or_list else ""


class WhizError(Exception):
    """Base of every error whiz raises on purpose."""

    status = 500
    type = "server_error"
    code = "internal_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI error object: {"message", "type", "param", "code"}."""
        return {"message": self.message, "type": self.type, "param": self.param, "code": self.code}


class InvalidRequest(WhizError):
    """The request is malformed: bad JSON, wrong types, unknown values."""

    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class ContextOverflow(InvalidRequest):
    """A request needs more tokens than one conversation may hold."""

    code = "context_length_exceeded"

    def __init__(self, needed: int, limit: int, *, param: str | None = "input"):
        super().__init__(
            f"This request needs {needed} tokens, but the context window is {limit} tokens. "
            "Shorten the input or lower max_output_tokens.",
            param=param,
        )
        self.needed = needed
        self.limit = limit


class NotFound(WhizError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class AuthError(WhizError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class RateLimited(WhizError):
    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"


class PayloadTooLarge(WhizError):
    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class EngineError(WhizError):
    """The engine failed; the request ends, the server goes on."""

    code = "engine_error"


class KVCacheFull(EngineError):
    """The KV cache has no room for a batch; the scheduler evicts idle sessions and retries."""

    code = "kv_cache_full"


class Forbidden(WhizError):
    """The request is well-formed but not allowed from where it came (origin, host, path)."""

    status = 403
    type = "invalid_request_error"
    code = "forbidden"


class Conflict(WhizError):
    """The request no longer fits the current state (a file changed under a pending edit)."""

    status = 409
    type = "invalid_request_error"
    code = "conflict"
