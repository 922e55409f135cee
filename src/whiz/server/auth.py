"""API keys and a per-key rate limit."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import OrderedDict

from whiz.errors import AuthError, RateLimited


def bearer(header: str | None) -> str | None:
    if header and header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return None


class KeyCheck:
    """Accepts any request when no keys are configured; otherwise only the listed keys."""

    def __init__(self, keys: list[str]):
        self.keys = list(dict.fromkeys(keys))
        self._digests = [hashlib.sha256(k.encode()).digest() for k in self.keys]

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
        digest = hashlib.sha256(key.encode(errors="surrogatepass")).digest()
        found = False
        for known in self._digests:
            found |= hmac.compare_digest(digest, known)
        return found

    def tenant(self, key: str | None) -> str | None:
        """Whose request this is, for cache isolation: a digest of a valid key; None without keys
        (one tenant: the server's owner)."""
        if not self.keys or key is None:
            return None
        return hashlib.sha256(key.encode(errors="surrogatepass")).hexdigest()[:16]


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
