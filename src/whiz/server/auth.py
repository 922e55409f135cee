"""API keys, the tenant each request belongs to, and a per-key rate limit."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from starlette.requests import HTTPConnection

from whiz.config import TENANT_HEADER, TENANT_KEPT_HEADER
from whiz.errors import AuthError, InvalidRequest, RateLimited

__all__ = [
    "KEY_SCOPE",
    "TENANT_HEADER",
    "TENANT_KEPT_HEADER",
    "KeyCheck",
    "bearer",
    "checked_key",
    "named_tenant",
]

_TENANT_NAME = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def bearer(header: str | None) -> str | None:
    if header and header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return None


KEY_SCOPE = "whiz.key"
"""Where the key a request was let in with is kept in its ASGI scope (server/guards.py)."""


def checked_key(conn: HTTPConnection) -> str | None:
    """The key this request's route was let in with by `guards.KeyRequired` (None on a server
    without keys, or on a public route)."""
    return conn.scope.get(KEY_SCOPE)


def named_tenant(headers: Mapping[str, str]) -> str | None:
    """The tenant a request names in `X-Whiz-Tenant` (trusted or not: see `KeyCheck.tenant`)."""
    name = headers.get(TENANT_HEADER)
    if name is None:
        return None
    if not _TENANT_NAME.fullmatch(name):
        raise InvalidRequest(
            f"{TENANT_HEADER} must be 1 to 64 letters, digits or ._:- characters.", param=TENANT_HEADER
        )
    return name


class KeyCheck:
    """Accepts any request when no keys are configured; otherwise only the listed keys.

    `gateway_keys` are accepted too, and a request made with one may name its client's tenant
    (`X-Whiz-Tenant`): a gateway in front of this server says whose request it forwards.
    """

    def __init__(self, keys: Iterable[str], gateway_keys: Iterable[str] = ()):
        gateways = list(dict.fromkeys(gateway_keys))
        self.keys = list(dict.fromkeys([*keys, *gateways]))
        self._digests = [hashlib.sha256(k.encode()).digest() for k in self.keys]
        self._gateways = [hashlib.sha256(k.encode()).digest() for k in gateways]

    def check(self, key: str | None) -> None:
        if not self.keys:
            return
        if key is None:
            raise AuthError("Missing API key. Send 'Authorization: Bearer <key>'.", code="missing_api_key")
        if not self.valid(key):
            raise AuthError("Incorrect API key provided.")

    def valid(self, key: str) -> bool:
        """Compared in constant time against every key: the time taken tells nothing about any key.

        Hashing first makes the inputs equal in length, which `compare_digest` needs to be constant.
        """
        return _among(key, self._digests)

    def names_tenants(self, key: str | None) -> bool:
        """Whether a request made with `key` (already checked) may name its tenant: on a server
        without keys, or with a gateway key. A server that says so answers `X-Whiz-Tenant-Kept`."""
        if not self.keys:
            return True
        return key is not None and bool(self._gateways) and _among(key, self._gateways)

    def tenant(self, key: str | None, named: str | None = None) -> str | None:
        """Whose request this is, for cache isolation: a digest of a valid key; None without keys
        (one tenant: the server's owner).

        `named` is the tenant a request names (`named_tenant`). It is trusted from a gateway key,
        within that gateway's own tenant, and on a server without keys, where everyone is the owner
        and naming a tenant only narrows what the request shares (a gateway's tenant is a digest of
        a key no one else holds). From any other key it is ignored.
        """
        if not self.keys:
            return None if named is None else "via:" + named
        if key is None:
            return None
        own = hashlib.sha256(key.encode(errors="surrogatepass")).hexdigest()[:16]
        if named is not None and self.names_tenants(key):
            return f"{own}/{named}"
        return own


def _among(key: str, digests: list[bytes]) -> bool:
    digest = hashlib.sha256(key.encode(errors="surrogatepass")).digest()
    found = False
    for known in digests:
        found |= hmac.compare_digest(digest, known)
    return found


class RateLimiter:
    """A token bucket per key: `rpm` requests a minute, bursting up to `rpm`.

    Its table is bounded: when full, the bucket unused longest goes (it refills to full after a
    minute of silence anyway, so forgetting it costs nothing but that minute).
    """

    def __init__(self, rpm: int, clock=time.monotonic, max_keys: int = 10_000):
        self.rpm = rpm
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str | None, tuple[float, float]] = OrderedDict()

    def hit(self, key: str | None) -> None:
        if self.rpm <= 0:
            return
        now = self._clock()
        tokens, last = self._buckets.get(key, (float(self.rpm), now))
        tokens = min(float(self.rpm), tokens + (now - last) * self.rpm / 60)
        if tokens < 1:
            wait_s = (1 - tokens) * 60 / self.rpm
            raise RateLimited(
                f"Rate limit of {self.rpm} requests per minute reached; retry in {wait_s:.1f} s."
            )
        self._buckets[key] = (tokens - 1, now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
