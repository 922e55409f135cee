"""The errors a whiz client raises, part of whiz's one error hierarchy.

A caller catches `ClientError` for anything that went wrong talking to a server, or one of its
subclasses to react: `PreviousResponseNotFound` means "resend the full input",
`WebSocketUnsupported` means "fall back to HTTP".
"""

from __future__ import annotations

from typing import Any

from whiz.errors import WhizError


class ClientError(WhizError):
    """Something went wrong between this client and the server."""

    code = "client_error"


class ConnectError(ClientError):
    """The server could not be reached, or refused the connection. The message names the URL."""

    code = "connect_error"


class WebSocketUnsupported(ConnectError):
    """The server answered, but not with a WebSocket upgrade (it has no WebSocket mode)."""

    code = "websocket_unsupported"


class ConnectionLost(ClientError):
    """The connection closed before the response finished."""

    code = "connection_lost"


class ClientTimeout(ClientError):
    """The server sent nothing for longer than the client's receive timeout."""

    code = "timeout"


class ProtocolError(ClientError):
    """The server sent something that is not a valid event (a binary frame, bad JSON)."""

    code = "protocol_error"


class ResponseError(ClientError):
    """The server answered with an OpenAI-style error object (an `error` event or HTTP 4xx/5xx)."""

    def __init__(
        self,
        message: str,
        *,
        code: str | None,
        param: str | None = None,
        status: int | None = None,
        type: str | None = None,
    ):
        super().__init__(message, param=param, code=code or "error")
        self.status = status or 500
        self.type = type or "server_error"

    @classmethod
    def from_error(cls, error: dict[str, Any], status: int | None = None) -> ResponseError:
        """Build from the wire error object; picks the most specific subclass for its code."""
        code = error.get("code")
        kind = PreviousResponseNotFound if code == "previous_response_not_found" else cls
        message = error.get("message") or "the server reported an error without a message"
        return kind(message, code=code, param=error.get("param"), status=status, type=error.get("type"))

    def __str__(self) -> str:
        where = f" (param: {self.param})" if self.param else ""
        return f"{self.code}: {self.message}{where}"


class PreviousResponseNotFound(ResponseError):
    """The server no longer holds `previous_response_id`; resend the whole conversation."""


class ResponseFailed(ResponseError):
    """The response ended with status `failed`; raised by the helpers that collect a whole turn."""
