"""What can go wrong between the gateway and an upstream, as errors a client can act on.

Each names the replica and says what happened. `elsewhere` says whether the same turn may be
tried on another replica (the replica failed, not the request); `sick` whether the replica should
leave the rotation until a health check brings it back.
"""

from __future__ import annotations

from typing import Any

from whiz.errors import InvalidRequest, PayloadTooLarge, RateLimited, WhizError


class UpstreamError(WhizError):
    """An upstream answered with an error, or not at all."""

    status = 502
    type = "server_error"
    code = "upstream_error"
    elsewhere = True
    sick = False


class UpstreamUnavailable(UpstreamError):
    """No replica could be reached (connection refused, none healthy)."""

    status = 503
    code = "upstream_unavailable"
    sick = True


class UpstreamTimeout(UpstreamError):
    """The upstream sent nothing for longer than --upstream-timeout-s."""

    status = 504
    code = "upstream_timeout"
    sick = True


class UpstreamProtocolError(UpstreamError):
    """The upstream answered with something that is not an OpenAI chat-completions stream."""

    code = "upstream_protocol_error"


class UpstreamLost(UpstreamError):
    """The replica went away in the middle of a response.

    The gateway kept the conversation as it was before this turn, so the client sends the same
    turn again (the same `previous_response_id` and input); it runs on another replica.
    """

    code = "upstream_lost"
    sick = True


class UpstreamRefused(UpstreamError):
    """The upstream refused the gateway itself (its key, or a model it does not serve)."""

    elsewhere = False
    code = "upstream_refused"


def from_upstream(replica: str, status: int, body: Any) -> WhizError:
    """The error to give the client for an upstream's HTTP error answer.

    The client's own mistakes (400, 413, 429) keep their status and the upstream's message; the
    gateway's problems (a bad upstream key, an unknown model, a 5xx) become 5xx errors that name
    the replica.
    """
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = body if isinstance(body, dict) and "message" in body else {}  # vLLM's older shape
    message = error.get("message") if isinstance(error.get("message"), str) else None
    code = error.get("code") if isinstance(error.get("code"), str) else None
    param = error.get("param") if isinstance(error.get("param"), str) else None
    said = message or (body if isinstance(body, str) else "") or f"HTTP {status}"
    if status == 400 or status == 422:
        return InvalidRequest(said, param=param, code=code)
    if status == 413:
        return PayloadTooLarge(said)
    if status == 429:
        return RateLimited(f"Upstream {replica} is rate limiting: {said}", code=code)
    if status in (401, 403):
        return UpstreamRefused(
            f"Upstream {replica} refused the gateway's key (HTTP {status}): {said}. Check --upstream-key.",
            code="upstream_auth_failed",
        )
    if status == 404:
        return UpstreamRefused(
            f"Upstream {replica} answered 404: {said}. Check --upstream-model and the URL."
        )
    err = UpstreamError(f"Upstream {replica} failed with HTTP {status}: {said}")
    if status in (502, 503, 504):
        err.sick = True  # a proxy in front of a dead server, or a server still loading
    return err
