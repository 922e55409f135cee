"""One OpenAI-compatible server behind whiz: what it is, whether it is alive, and streaming a turn.

Any server that speaks streamed `/v1/chat/completions` works: vLLM, SGLang, llama.cpp's
`llama-server`, another whiz, OpenAI itself. What differs is found out from `GET /v1/models`
(`owned_by` says which server it is) and decides two things:

- `prediction` (OpenAI's Predicted Outputs) is sent only to servers that accept it (whiz and
  OpenAI); the others would reject it or ignore it, so speculation is simply left off there.
- `prompt_cache_key` is sent only where it is honoured (whiz uses it to keep a session's KV slot,
  OpenAI to route to a warm cache); vLLM and llama-server cache by prefix on their own.

Both can be forced either way per upstream (`UpstreamConfig.prediction`, `.cache_key`).

Tenants (one per API key of the gateway) are kept apart only where the upstream says it can: a
whiz replica that answers `X-Whiz-Tenant-Kept` to the tenant the gateway names (it does for a
`--gateway-key`, or without keys), and vLLM 0.9 or later, whose prefix cache is salted per request
(`cache_salt`). Elsewhere one tenant's cached prefix would tell another what it holds, so the
gateway reports no cached tokens to any tenant there (`Upstream.keeps_tenants`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from whiz.backend.types import TurnRequest
from whiz.client.urls import api_base
from whiz.config import TENANT_HEADER, TENANT_KEPT_HEADER
from whiz.gateway.errors import (
    UpstreamError,
    UpstreamLost,
    UpstreamProtocolError,
    UpstreamRefused,
    UpstreamTimeout,
    UpstreamUnavailable,
    from_upstream,
)
from whiz.gateway.wire import chat_messages

log = logging.getLogger("whiz.gateway")

# owned_by in GET /v1/models -> the server it is.
FLAVOURS = {
    "whiz": "whiz",
    "vllm": "vllm",
    "llamacpp": "llama.cpp",
    "sglang": "sglang",
    "openai": "openai",
    "system": "openai",
    "openai-internal": "openai",
}
# What each server honours: (prediction, prompt_cache_key).
HONOURS = {"whiz": (True, True), "openai": (True, True)}
CONTINUES = frozenset({"whiz", "vllm"})
"""Servers that honour Chat Completions' `continue_final_message`."""
VLLM_SALTS_FROM = (0, 9)
"""The first vLLM release with `cache_salt` (older ones ignore the field and share every prefix)."""
PROBE_TENANT = "whiz-gateway-probe"
"""The tenant named when asking a whiz replica, at discovery, whether it keeps tenants apart."""


def wire_tenant(tenant: str, secret: bytes = b"") -> str:
    """What an upstream is told of a tenant: a fixed-size hex digest, so whatever the gateway's
    own tenant looks like (a key's digest, or a chained gateway's `own/named`) it is a valid
    `X-Whiz-Tenant` and a plain `cache_salt`. Keyed by `secret` (`UpstreamConfig.tenant_secret`):
    a plain digest of a key would let the upstream test guesses of a weak key against it."""
    return hmac.new(secret, tenant.encode(), hashlib.sha256).hexdigest()[:32]


@dataclass
class UpstreamConfig:
    """How to reach one upstream and what to send it."""

    url: str
    key: str | None = None
    model: str | None = None
    """The model id to ask for (default: the first one the server lists)."""
    prediction: bool | None = None
    """Send `prediction` (None: where the server is known to accept it)."""
    cache_key: bool | None = None
    """Send `prompt_cache_key` (None: where the server is known to honour it)."""
    timeout_s: float = 300.0
    """Longest silence while waiting for or reading a stream."""
    connect_timeout_s: float = 5.0
    tenant_secret: bytes = b""
    """Keys what the upstream is told of each tenant (`wire_tenant`); the gateway derives it from
    its own keys, which the upstream never sees."""


def _reason(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError):
        said = str(exc).lower()
        return "connection refused" if "refused" in said or "all connection attempts failed" in said else said
    return str(exc) or type(exc).__name__


class Upstream:
    """One upstream server. Its HTTP client belongs to the event loop that first uses it."""

    def __init__(self, config: UpstreamConfig, *, transport: httpx.AsyncBaseTransport | None = None):
        self.config = config
        self.base = api_base(config.url)
        self.name = self.base.removesuffix("/v1")
        self.model = config.model
        self.flavour = "unknown"
        self.n_ctx: int | None = None
        self.tenants_kept: bool | None = None
        """Whether this upstream keeps the gateway's tenants apart, as it last said (None: not yet
        asked); see `keeps_tenants`."""
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        self._headers = {"Authorization": f"Bearer {config.key}"} if config.key else {}

    # -- what it is ---------------------------------------------------------------------------

    @property
    def discovered(self) -> bool:
        return self.flavour != "unknown"

    @property
    def sends_prediction(self) -> bool:
        if self.config.prediction is not None:
            return self.config.prediction
        return HONOURS.get(self.flavour, (False, False))[0]

    @property
    def continues(self) -> bool:
        """Whether it goes on from a reply's start (`continue_final_message`): whiz and vLLM do;
        another server may answer the conversation afresh, and the client could not tell."""
        return self.flavour in CONTINUES

    @property
    def sends_cache_key(self) -> bool:
        if self.config.cache_key is not None:
            return self.config.cache_key
        return HONOURS.get(self.flavour, (False, False))[1]

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            timeout = httpx.Timeout(self.config.timeout_s, connect=self.config.connect_timeout_s)
            self._http = httpx.AsyncClient(headers=self._headers, timeout=timeout, transport=self._transport)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def discover(self, timeout_s: float = 5.0) -> None:
        """Learn the model id, the kind of server and its context window from `GET /v1/models`."""
        try:
            response = await self._client().get(self.base + "/models", timeout=timeout_s)
        except httpx.TransportError as exc:
            raise UpstreamUnavailable(f"Upstream {self.name} is unreachable: {_reason(exc)}.") from None
        if response.status_code >= 400:
            raise from_upstream(self.name, response.status_code, _json_or_text(response))
        try:
            entries = response.json()["data"]
            ids = [e["id"] for e in entries]
        except (ValueError, KeyError, TypeError):
            raise UpstreamProtocolError(
                f"Upstream {self.name}: GET /v1/models is not a model list."
            ) from None
        if not entries:
            raise UpstreamRefused(f"Upstream {self.name} serves no model.")
        if self.model is not None and self.model not in ids:
            raise UpstreamRefused(f"Upstream {self.name} does not serve '{self.model}' (it serves {ids}).")
        entry = entries[ids.index(self.model)] if self.model else entries[0]
        self.model = entry["id"]
        self.flavour = FLAVOURS.get(str(entry.get("owned_by", "")).lower(), "openai-compatible")
        meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
        # whiz says context_window, vLLM max_model_len, llama-server meta.n_ctx (per slot).
        window = entry.get("context_window") or entry.get("max_model_len") or meta.get("n_ctx")
        self.n_ctx = window if isinstance(window, int) and window > 0 else None
        self.tenants_kept = await self._asks_tenants_apart(timeout_s)

    async def _asks_tenants_apart(self, timeout_s: float) -> bool:
        """Whether this upstream keeps tenants apart: a whiz replica is asked by naming a tenant
        (it answers `X-Whiz-Tenant-Kept` where it honours one); vLLM by its version."""
        try:
            if self.flavour == "whiz":
                headers = {TENANT_HEADER: PROBE_TENANT}
                response = await self._client().get(self.base + "/models", headers=headers, timeout=timeout_s)
                return response.headers.get(TENANT_KEPT_HEADER) == "1"
            if self.flavour == "vllm":
                response = await self._client().get(self.name + "/version", timeout=timeout_s)
                said = response.json().get("version") if response.status_code == 200 else None
                return _version(said) >= VLLM_SALTS_FROM
        except (httpx.HTTPError, ValueError, AttributeError):
            pass
        return False

    @property
    def keeps_tenants(self) -> bool:
        """Whether one tenant's cached prefixes here stay that tenant's own: True only where the
        upstream said so (see the module's docstring)."""
        return self.flavour in ("whiz", "vllm") and self.tenants_kept is True

    @property
    def tenant_isolation(self) -> str:
        """How tenants are kept apart here, or why they are not, in words (for the banner)."""
        if self.keeps_tenants:
            return "by X-Whiz-Tenant" if self.flavour == "whiz" else "by cache_salt"
        if self.flavour == "whiz":
            return "it ignores X-Whiz-Tenant from this gateway's key; start it with --gateway-key KEY"
        if self.flavour == "vllm":
            return f"not a vLLM with cache_salt ({'.'.join(map(str, VLLM_SALTS_FROM))} or later)"
        return f"{self.flavour} has no per-tenant prefix cache"

    def kept(self, response: httpx.Response, tenant: str | None) -> bool:
        """Whether this turn's cache was the tenant's own: a whiz replica says so on every
        response (it may have been restarted with other keys since discovery)."""
        if tenant is None:
            return True  # a gateway without keys: one owner
        if self.flavour != "whiz":
            return self.keeps_tenants
        kept = response.headers.get(TENANT_KEPT_HEADER) == "1"
        if kept != self.tenants_kept:
            if not kept:
                log.warning(
                    "upstream %s no longer keeps this gateway's tenants apart: their cached tokens are "
                    "reported as 0 (start it with --gateway-key KEY)",
                    self.name,
                )
            self.tenants_kept = kept
        return kept

    async def probe(self, timeout_s: float = 2.0) -> str | None:
        """None if the server answers its health check, else why not.

        `/health` where the server has one (whiz, vLLM, llama-server, SGLang; llama-server answers
        503 while it loads), else `/v1/models`.
        """
        try:
            response = await self._client().get(self.name + "/health", timeout=timeout_s)
            if response.status_code in (404, 405):
                response = await self._client().get(self.base + "/models", timeout=timeout_s)
        except httpx.TimeoutException:
            return f"no answer to its health check within {timeout_s:g} s"
        except httpx.TransportError as exc:
            return f"unreachable: {_reason(exc)}"
        if response.status_code >= 400:
            return f"health check answered HTTP {response.status_code}"
        return None

    # -- a turn -------------------------------------------------------------------------------

    def tenant_headers(self, tenant: str | None) -> dict[str, str]:
        """Whose turn this is, for an upstream that keeps tenants apart: another whiz (the header
        it trusts from its --gateway-key, or from anyone when it has no keys)."""
        if tenant is None or self.flavour != "whiz":
            return {}
        return {TENANT_HEADER: wire_tenant(tenant, self.config.tenant_secret)}

    def body(self, request: TurnRequest, cache_key: str | None) -> dict[str, Any]:
        """The streamed chat-completions request for one turn, the whole history included."""
        body: dict[str, Any] = {
            "model": self.model or "default",
            "messages": chat_messages(request.system, request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": request.sampling.temperature,
            "top_p": request.sampling.top_p,
        }
        if request.sampling.seed is not None:
            body["seed"] = request.sampling.seed
        if not request.generate:
            body["max_tokens"] = 1  # a warm-up: prefill into the upstream's prefix cache
        elif request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.tools:
            body["tools"] = [t.as_chat_tool() for t in request.tools]
            if request.tool_choice == "required":
                body["tool_choice"] = "required"
            elif request.tool_choice is not None:
                body["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
        if request.stop:
            body["stop"] = list(request.stop)
        if request.prediction and self.sends_prediction:
            body["prediction"] = {"type": "content", "content": request.prediction}
        if cache_key and self.sends_cache_key:
            body["prompt_cache_key"] = cache_key
        if request.continue_last:  # only to those that do (`continues`; the gateway checks)
            body["continue_final_message"] = True
            if self.flavour == "vllm":
                body["add_generation_prompt"] = False  # vLLM asks for both
        if request.tenant and self.flavour == "vllm":
            # vLLM shares cached prefixes only between requests of one salt.
            body["cache_salt"] = wire_tenant(request.tenant, self.config.tenant_secret)
        if self.flavour == "whiz":
            off = {"speculation": False} if not request.speculation else {}
            off |= {"tool_grammar": False} if not request.tool_grammar else {}
            if off:
                body["whiz"] = off
        return body

    async def open(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
        """POST a streamed completion; the response once the upstream answered 200 with a stream."""
        client = self._client()
        try:
            request = client.build_request(
                "POST", self.base + "/chat/completions", json=body, headers=headers
            )
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            if isinstance(exc, httpx.ConnectTimeout):
                raise UpstreamUnavailable(
                    f"Upstream {self.name} did not accept a connection within "
                    f"{self.config.connect_timeout_s:g} s."
                ) from None
            raise self._timeout() from None
        except httpx.TransportError as exc:
            raise UpstreamUnavailable(f"Upstream {self.name} is unreachable: {_reason(exc)}.") from None
        if response.status_code >= 400:
            try:
                await response.aread()
                said = _json_or_text(response)
            except httpx.HTTPError:
                said = ""
            finally:
                await response.aclose()
            raise from_upstream(self.name, response.status_code, said)
        kind = response.headers.get("content-type", "")
        if "text/event-stream" not in kind:
            await response.aclose()
            raise UpstreamProtocolError(
                f"Upstream {self.name} answered a streamed request with '{kind or 'no content type'}', "
                "not server-sent events."
            )
        return response

    async def chunks(self, response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
        """Each event's JSON until `[DONE]` or the end of the stream."""
        try:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue  # comments (keep-alives), event names, blank separators
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    chunk = json.loads(data)
                except json.JSONDecodeError:
                    raise UpstreamProtocolError(
                        f"Upstream {self.name} sent a malformed stream: {data[:120]!r} is not JSON."
                    ) from None
                if not isinstance(chunk, dict):
                    raise UpstreamProtocolError(
                        f"Upstream {self.name} sent a malformed stream: {data[:120]!r} is not an object."
                    )
                if chunk.get("error") and not chunk.get("choices"):
                    said = (
                        chunk["error"].get("message") if isinstance(chunk["error"], dict) else chunk["error"]
                    )
                    raise UpstreamError(f"Upstream {self.name} failed mid-stream: {said}")
                yield chunk
        except httpx.TimeoutException:
            raise self._timeout() from None
        except httpx.TransportError as exc:
            raise UpstreamLost(
                f"Upstream {self.name} dropped the connection mid-stream ({_reason(exc)})."
            ) from None

    def _timeout(self) -> UpstreamTimeout:
        return UpstreamTimeout(
            f"Upstream {self.name} sent nothing for {self.config.timeout_s:g} s (--upstream-timeout-s)."
        )


def _version(said: object) -> tuple[int, ...]:
    """`"0.9.1"` -> (0, 9); anything unreadable -> () (older than every release)."""
    found = re.match(r"(\d+)\.(\d+)", said) if isinstance(said, str) else None
    return (int(found[1]), int(found[2])) if found else ()


def _json_or_text(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:300]
