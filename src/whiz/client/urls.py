"""Turning the base URL a user types into the URLs the clients use."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

_WS_SCHEMES = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}


def api_base(base_url: str) -> str:
    """`http://host:port` or `http://host:port/v1` (or ws://...) -> `http://host:port/v1`."""
    text = base_url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in _WS_SCHEMES:
        raise ValueError(f"unsupported URL scheme in {base_url!r}; use http:// or https://")
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/")
    # Accept a URL that already points at an endpoint, as users paste whatever they have.
    for suffix in ("/responses", "/chat/completions"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit((scheme, parts.netloc, path, "", ""))


def responses_ws_url(base_url: str) -> str:
    """The WebSocket mode endpoint: `ws://host:port/v1/responses`."""
    parts = urlsplit(api_base(base_url))
    return urlunsplit((_WS_SCHEMES[parts.scheme], parts.netloc, parts.path + "/responses", "", ""))
