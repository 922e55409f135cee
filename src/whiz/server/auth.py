"""API keys and a per-key rate limit."""

from __future__ import annotations

import time

from whiz.errors import AuthError, RateLimited


def bearer(header: str | None) -> str | None:
    if header and header.lower().startswith("bearer "):
        return header[7:].strip() or None
    return None


class KeyCheck:
    """Accepts any request when no keys are configured; otherwise only the listed keys."""

    def __init__(self, keys: list[str]):
        self.keys = set(keys)

    def check(self, key: str | None) -> None:
        if not self.keys:
            return
        if key is None:
            raise AuthError("Missing API key. Send 'Authorization: Bearer <key>'.", code="missing_api_key")
        if key not in self.keys:
            raise AuthError("Incorrect API key provided.")


class RateLimiter:
    """A token bucket per key: `rpm` requests a minute, bursting up to `rpm`."""

    def __init__(self, rpm: int, clock=time.monotonic):
        self.rpm = rpm
        self._clock = clock
        self._buckets: dict[str | None, tuple[float, float]] = {}

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
