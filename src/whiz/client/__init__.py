"""The client for whiz's wire protocols, shared by the agent, the benchmarks and the web tests.

`ResponsesSocket` speaks Responses WebSocket mode (the fast path); `HttpClient` speaks the HTTP
endpoints of whiz or any OpenAI-compatible server. Both raise the `ClientError` family.
"""

from whiz.client.errors import (
    ClientError,
    ClientTimeout,
    ConnectError,
    ConnectionLost,
    PreviousResponseNotFound,
    ProtocolError,
    ResponseError,
    ResponseFailed,
    WebSocketUnsupported,
)
from whiz.client.http import HttpClient
from whiz.client.items import assistant_message, user_message
from whiz.client.socket import ResponsesSocket
from whiz.client.turn import TERMINAL_EVENTS, Exchange
from whiz.client.urls import api_base, responses_ws_url

__all__ = [
    "TERMINAL_EVENTS",
    "ClientError",
    "ClientTimeout",
    "ConnectError",
    "ConnectionLost",
    "HttpClient",
    "PreviousResponseNotFound",
    "ProtocolError",
    "ResponseError",
    "ResponseFailed",
    "ResponsesSocket",
    "Exchange",
    "WebSocketUnsupported",
    "api_base",
    "assistant_message",
    "responses_ws_url",
    "user_message",
]
