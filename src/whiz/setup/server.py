"""The server a client is set up for: its address, and its context window where it answers."""

from __future__ import annotations

import os

import httpx

from whiz.client.urls import api_base
from whiz.setup.base import DEFAULT_WINDOW, ConfigError, Server

DEFAULT_ROOT = "http://127.0.0.1:8321"
PROBE_TIMEOUT_S = 3.0


def find_server(base_url: str | None, api_key: str | None, env: dict[str, str] | None = None) -> Server:
    """The server at `base_url` (default `$WHIZ_BASE_URL`, else port 8321 here), with the context
    window its `/v1/models` says, or `DEFAULT_WINDOW` when it does not answer."""
    env = dict(os.environ) if env is None else env
    given = base_url or env.get("WHIZ_BASE_URL") or DEFAULT_ROOT
    try:
        root = api_base(given).removesuffix("/v1")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        answer = httpx.get(f"{root}/v1/models", headers=headers, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError:
        return Server(root, DEFAULT_WINDOW, api_key, reachable=False, explicit=bool(base_url))
    if answer.status_code == 401:
        raise ConfigError(f"the server at {root} wants a key: give it with --api-key (or WHIZ_API_KEY)")
    window = DEFAULT_WINDOW
    try:
        entries = answer.json().get("data") or []
        window = int(entries[0].get("context_window") or DEFAULT_WINDOW) if entries else DEFAULT_WINDOW
    except (ValueError, AttributeError, TypeError):
        return Server(root, DEFAULT_WINDOW, api_key, reachable=False, explicit=bool(base_url))
    return Server(root, window, api_key, reachable=answer.is_success, explicit=bool(base_url))
