"""Which replica runs a turn: session affinity by consistent hashing, bounded by load.

A session (a WebSocket connection, a previous_response_id chain, a prompt_cache_key, a session
header, or for plain chat completions the conversation's first messages) is pinned to the replica
that ran its first turn, because that replica holds its KV cache. A new session goes to the first
replica clockwise from its hash on a ring of virtual nodes, skipping replicas that are out of
rotation or already carry more than `load_factor` times the average number of sessions
("consistent hashing with bounded loads"): the same key lands on the same replica on every
gateway and after a restart, and no replica gets more than its share.

When a replica leaves the rotation, its sessions move on their next turn to the next replica on
the ring, and stay there: their cache is there now.
"""

from __future__ import annotations

import hashlib
import math
import time
from bisect import bisect
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from whiz.engine.types import GenerationStats
from whiz.gateway.errors import UpstreamError, UpstreamUnavailable
from whiz.gateway.upstream import Upstream

Policy = Literal["affinity", "round-robin"]


def ring_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


@dataclass(eq=False)
class Replica:
    """One upstream in the rotation, with what the gateway has seen of it."""

    upstream: Upstream
    healthy: bool = True
    reason: str | None = None
    """Why it is out of rotation."""
    down_until: float = 0.0
    """A health check may bring it back only after this time (a replica failing requests)."""
    sessions: int = 0
    in_flight: int = 0
    requests: int = 0
    errors: int = 0
    failures_in_row: int = 0
    strikes: int = 0
    """Times it left the rotation since it last served a request: its back-off doubles with each."""
    prompt_tokens: int = 0
    cached_tokens: int = 0

    @property
    def name(self) -> str:
        return self.upstream.name


@dataclass
class _Pin:
    replica: Replica
    last_used: float


@dataclass
class Router:
    """Chooses replicas for turns and keeps the sessions pinned to them. Not thread-safe: one loop."""

    replicas: list[Replica]
    policy: Policy = "affinity"
    load_factor: float = 1.25
    """A new session skips replicas above this multiple of the average load."""
    vnodes: int = 64
    session_idle_s: float = 3600.0
    """A session unused this long is forgotten (its replica's load drops)."""
    max_sessions: int = 100_000
    fail_threshold: int = 3
    """Consecutive failed requests that take a replica out of rotation."""
    cooloff_s: float = 30.0
    backoff_s: float = 1.0
    """How long a replica that left the rotation stays out at least; doubled each time it leaves
    again before serving a request, so a replica that is sick on and off does not flap."""
    backoff_max_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    failovers: int = 0
    """Sessions moved off a replica that left the rotation."""
    _pins: OrderedDict[str, _Pin] = field(default_factory=OrderedDict)
    _ring: list[tuple[int, Replica]] = field(default_factory=list)
    _next: int = 0

    def __post_init__(self) -> None:
        if not self.replicas:
            raise ValueError("a router needs at least one replica")
        points = [(ring_hash(f"{r.name}#{i}"), r) for r in self.replicas for i in range(self.vnodes)]
        self._ring = sorted(points, key=lambda p: p[0])

    # -- choosing -----------------------------------------------------------------------------

    def route(self, key: str, exclude: Iterable[str] = ()) -> Replica:
        """The replica for the next turn of session `key`, avoiding the replicas in `exclude`.

        Raises `UpstreamUnavailable` when every replica was already tried for this turn.
        """
        skip = set(exclude)
        live = [r for r in self.replicas if r.healthy and r.name not in skip]
        if not live:
            # Every replica is out of rotation: try them anyway rather than refuse unasked (one
            # may be back before its next health check); a turn still tries each at most once.
            live = [r for r in self.replicas if r.name not in skip]
        if not live:
            raise UpstreamUnavailable(self._none_left(skip))
        if self.policy == "round-robin":
            self._next += 1
            return live[self._next % len(live)]
        self._expire()
        pin = self._pins.get(key)
        if pin is not None:
            if pin.replica in live:
                pin.last_used = self.clock()
                self._pins.move_to_end(key)
                return pin.replica
            self.failovers += 1
            self._unpin(key)
        chosen = self._ring_choice(key, live)
        self._pins[key] = _Pin(chosen, self.clock())
        chosen.sessions += 1
        return chosen

    def move(self, key: str, away_from: Replica) -> None:
        """Re-pin a session whose turn just failed on `away_from`, so its next turn runs elsewhere."""
        pin = self._pins.get(key)
        if pin is None or pin.replica is not away_from:
            return
        self._unpin(key)
        self.failovers += 1
        others = [r for r in self.replicas if r.healthy and r is not away_from]
        if others:
            chosen = self._ring_choice(key, others)
            self._pins[key] = _Pin(chosen, self.clock())
            chosen.sessions += 1

    def _ring_choice(self, key: str, live: Sequence[Replica]) -> Replica:
        total = sum(r.sessions for r in live)
        cap = max(1, math.ceil(self.load_factor * (total + 1) / len(live)))
        start = bisect(self._ring, ring_hash(key), key=lambda p: p[0])
        for i in range(len(self._ring)):
            replica = self._ring[(start + i) % len(self._ring)][1]
            if replica in live and replica.sessions < cap:
                return replica
        return min(live, key=lambda r: r.sessions)  # unreachable: the average is below the cap

    def _none_left(self, skip: set[str]) -> str:
        why = "; ".join(
            f"{r.name}: {r.reason or 'failed this turn'}"
            for r in self.replicas
            if not r.healthy or r.name in skip
        )
        return f"No upstream replica can take this turn ({why})."

    def _unpin(self, key: str) -> None:
        pin = self._pins.pop(key)
        pin.replica.sessions -= 1

    def _expire(self) -> None:
        horizon = self.clock() - self.session_idle_s
        while self._pins:
            key, pin = next(iter(self._pins.items()))
            if pin.last_used >= horizon and len(self._pins) <= self.max_sessions:
                return
            self._unpin(key)

    def sessions(self) -> int:
        return len(self._pins)

    # -- what happened ------------------------------------------------------------------------

    def began(self, replica: Replica) -> None:
        replica.in_flight += 1

    def succeeded(self, replica: Replica, stats: GenerationStats) -> None:
        replica.in_flight -= 1
        replica.requests += 1
        replica.failures_in_row = 0
        replica.strikes = 0  # it serves again: the next time it leaves, its back-off starts over
        replica.prompt_tokens += stats.prompt_tokens
        replica.cached_tokens += stats.cached_tokens

    def abandoned(self, replica: Replica) -> None:
        """A turn on `replica` ended without an outcome (the client left, or cancelled it)."""
        replica.in_flight -= 1

    def failed(self, replica: Replica, error: UpstreamError | None) -> None:
        """A turn on `replica` ended in `error` (None: the client's own mistake, not the replica's)."""
        replica.in_flight -= 1
        replica.requests += 1
        replica.errors += 1
        if error is None:
            return
        replica.failures_in_row += 1
        if error.sick:
            self.mark_down(replica, error.message)
        elif replica.failures_in_row >= self.fail_threshold and any(
            r.healthy for r in self.replicas if r is not replica
        ):
            # Taking the last replica out would only turn its errors into "none available".
            self.mark_down(replica, f"{replica.failures_in_row} failed requests in a row", self.cooloff_s)

    def mark_down(self, replica: Replica, reason: str, cooloff_s: float = 0.0) -> None:
        """Take `replica` out of rotation for at least its back-off (or `cooloff_s`, if longer)."""
        if replica.healthy:
            replica.strikes += 1
            backoff = min(self.backoff_max_s, self.backoff_s * 2 ** (replica.strikes - 1))
            replica.down_until = max(replica.down_until, self.clock() + max(cooloff_s, backoff))
        replica.healthy = False
        replica.reason = reason

    def mark_up(self, replica: Replica) -> bool:
        """A health check passed; True if that brought the replica back into rotation."""
        if replica.healthy or self.clock() < replica.down_until:
            return False
        replica.healthy, replica.reason, replica.failures_in_row = True, None, 0
        return True
