"""How fast the reply on screen is coming: estimated while it streams, the server's figures after.

While a reply streams the UI only sees text, so time to first token is measured from the moment
the agent started waiting for the model, and tokens are estimated from characters. When the reply
ends, the server's own `whiz` timings (exact token counts, server-side TTFT) replace the estimate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4.0
"""A rough size of a code token, for the estimate shown while text streams."""


@dataclass
class LiveStats:
    """TTFT and tokens/s of the latest model reply. Times are `time.monotonic()` seconds."""

    waiting_since: float | None = None
    first_text_at: float | None = None
    last_text_at: float | None = None
    chars: int = 0
    ttft_ms: float | None = None
    tokens_per_s: float | None = None
    exact: bool = False
    """True once the figures are the server's rather than the UI's estimate."""

    def waiting(self, now: float | None = None) -> None:
        """The agent is about to ask the model: the next text's delay counts as TTFT."""
        self.waiting_since = time.monotonic() if now is None else now
        self.first_text_at = self.last_text_at = None
        self.chars = 0

    def text(self, delta: str, now: float | None = None) -> None:
        """A piece of the reply arrived."""
        now = time.monotonic() if now is None else now
        if self.first_text_at is None:
            self.first_text_at = now
            self.exact = False
            self.tokens_per_s = None
            if self.waiting_since is not None:
                self.ttft_ms = (now - self.waiting_since) * 1000
        self.last_text_at = now
        self.chars += len(delta)
        elapsed_s = now - self.first_text_at
        if elapsed_s >= 0.2:  # too few samples before that to say anything
            self.tokens_per_s = self.chars / CHARS_PER_TOKEN / elapsed_s

    def finished(self, timings: dict[str, Any]) -> None:
        """The reply ended; `timings` is the server's `whiz` object (may be empty)."""
        if timings.get("ttft_ms") is not None:
            self.ttft_ms = float(timings["ttft_ms"])
            self.exact = True
        tps = timings.get("tokens_per_s")
        if tps is None and timings.get("decode_ms") and timings.get("decode_tokens"):
            tps = timings["decode_tokens"] / timings["decode_ms"] * 1000
        if tps is not None:
            self.tokens_per_s = float(tps)
            self.exact = True
        self.waiting_since = None

    def describe(self) -> str:
        """`ttft 212 ms · 38.4 tok/s`; estimates are marked with `~`."""
        parts = []
        mark = "" if self.exact else "~"
        if self.ttft_ms is not None:
            parts.append(f"ttft {mark}{self.ttft_ms:.0f} ms")
        if self.tokens_per_s is not None:
            parts.append(f"{mark}{self.tokens_per_s:.1f} tok/s")
        return " · ".join(parts)
