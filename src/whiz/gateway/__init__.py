"""whiz in front of existing engines: upstream adapters and a session-affinity gateway.

`whiz serve --upstream URL` (repeatable) runs whiz's full API (chat completions, Responses over
HTTP and WebSocket mode) on top of any server that speaks streamed `/v1/chat/completions`. With
several upstreams whiz is a gateway: it pins each session to the replica holding its KV cache
(`router.py`), health-checks the replicas (`health.py`) and moves a session to another replica,
with its whole history, when its replica dies (`backend.py`).
"""

from __future__ import annotations

import hashlib
import os

from whiz.config import ServeSettings, UpstreamSpec
from whiz.errors import InvalidRequest
from whiz.gateway.backend import Gateway, GatewayTurn, session_key
from whiz.gateway.errors import (
    UpstreamError,
    UpstreamLost,
    UpstreamProtocolError,
    UpstreamRefused,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from whiz.gateway.router import Replica, Router
from whiz.gateway.upstream import Upstream, UpstreamConfig

__all__ = [
    "Gateway",
    "GatewayTurn",
    "Replica",
    "Router",
    "Upstream",
    "UpstreamConfig",
    "UpstreamError",
    "UpstreamLost",
    "UpstreamProtocolError",
    "UpstreamRefused",
    "UpstreamTimeout",
    "UpstreamUnavailable",
    "build_gateway",
    "upstream_configs",
    "session_key",
]


def upstream_configs(settings: ServeSettings) -> list[UpstreamConfig]:
    """Each `--upstream` (or config-file table) with its key, model and timeouts resolved."""
    out = []
    # Stable across restarts and across gateways with the same keys (the upstreams' caches stay
    # warm), and unknown to the upstreams.
    keys = sorted({*settings.api_keys, *settings.gateway_keys})
    secret = hashlib.sha256("\x00".join(keys).encode(errors="surrogatepass")).digest()
    for entry in settings.upstreams:
        spec = entry if isinstance(entry, UpstreamSpec) else UpstreamSpec(url=entry)
        key = spec.key
        if key is None and spec.key_env:
            key = os.environ.get(spec.key_env)
            if not key:
                raise InvalidRequest(
                    f"Upstream {spec.url}: the environment variable {spec.key_env} is not set."
                )
        out.append(
            UpstreamConfig(
                url=spec.url,
                key=key or settings.upstream_key,
                model=spec.model or settings.upstream_model,
                prediction=spec.prediction,
                cache_key=spec.cache_key,
                timeout_s=settings.upstream_timeout_s,
                connect_timeout_s=settings.upstream_connect_timeout_s,
                tenant_secret=secret,
            )
        )
    return out


def build_gateway(settings: ServeSettings) -> Gateway:
    """The gateway `whiz serve --upstream ...` runs."""
    try:
        upstreams = [Upstream(c) for c in upstream_configs(settings)]
    except ValueError as exc:
        raise InvalidRequest(f"Bad upstream URL: {exc}") from None
    names = [u.name for u in upstreams]
    if len(set(names)) != len(names):
        raise InvalidRequest(f"The same upstream is given twice: {', '.join(names)}.")
    return Gateway(
        upstreams,
        policy=settings.routing,
        model_name=settings.model_name,
        health_interval_s=settings.health_interval_s,
        max_candidates=settings.max_n,
        single_tenant=len(set(settings.api_keys)) == 1 and not settings.gateway_keys,
    )
