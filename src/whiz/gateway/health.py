"""Health checks: every few seconds each replica's health endpoint is asked; sick ones leave the rotation.

A replica also leaves the rotation the moment a request to it fails at the connection (or times
out, or drops a stream), without waiting for the next check; a passing check brings it back once
its back-off has passed (1 s, doubled each time it leaves again before serving a request, up to a
minute), so a replica that is sick on and off does not flap. One that failed several requests in
a row (HTTP 500s while its health endpoint still answers) waits out a longer cool-off. A whiz
replica's /health answers 503 while it drains or when its engine's worker is dead.
"""

from __future__ import annotations

import asyncio
import logging

from whiz.errors import WhizError
from whiz.gateway.router import Replica, Router

log = logging.getLogger("whiz.gateway")


class HealthChecker:
    """Probes every replica each `interval_s`; learns a replica's model once it first answers."""

    def __init__(self, router: Router, *, interval_s: float = 2.0, timeout_s: float = 2.0):
        self.router = router
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.checks = 0

    async def run(self) -> None:
        """Check forever (the gateway runs this as a task and cancels it on shutdown)."""
        while True:
            await self.check_all()
            await asyncio.sleep(self.interval_s)

    async def check_all(self) -> None:
        await asyncio.gather(*(self.check(r) for r in self.router.replicas))
        self.checks += 1

    async def check(self, replica: Replica) -> None:
        reason = await replica.upstream.probe(self.timeout_s)
        if reason is None and not replica.upstream.discovered:
            try:
                await replica.upstream.discover(self.timeout_s)
            except WhizError as exc:
                reason = exc.message
        if reason is not None:
            if replica.healthy:
                log.warning("replica %s out of rotation: %s", replica.name, reason)
            self.router.mark_down(replica, reason)
        elif self.router.mark_up(replica):
            log.warning("replica %s back in rotation", replica.name)
