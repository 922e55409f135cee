"""The router on its own: affinity, bounded load, health marks, failover, expiry."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from whiz.engine.types import GenerationStats
from whiz.gateway import Replica, Router, Upstream, UpstreamConfig, UpstreamUnavailable
from whiz.gateway.errors import UpstreamError, UpstreamLost


def replicas(n: int) -> list[Replica]:
    return [Replica(Upstream(UpstreamConfig(f"http://10.0.0.{i}:8000"))) for i in range(1, n + 1)]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_session_stays_on_its_replica():
    router = Router(replicas(3))
    first = router.route("session:a")
    assert all(router.route("session:a") is first for _ in range(20))


def test_new_sessions_spread_within_the_load_bound():
    router = Router(replicas(4), load_factor=1.25)
    for i in range(200):
        router.route(f"session:{i}")
    loads = [r.sessions for r in router.replicas]
    assert sum(loads) == 200
    assert max(loads) <= math.ceil(1.25 * 200 / 4)
    assert min(loads) > 0


def test_the_same_keys_land_on_the_same_replicas_on_another_gateway():
    a, b = Router(replicas(3)), Router(replicas(3))
    assert [a.route(f"k{i}").name for i in range(30)] == [b.route(f"k{i}").name for i in range(30)]


def test_a_replica_out_of_rotation_loses_only_its_own_sessions():
    clock = Clock()
    router = Router(replicas(3), clock=clock)
    before = {f"s{i}": router.route(f"s{i}") for i in range(60)}
    sick = router.replicas[0]
    router.mark_down(sick, "gone")
    after = {key: router.route(key) for key in before}
    moved = [k for k in before if after[k] is not before[k]]
    assert moved and all(before[k] is sick for k in moved)
    assert all(r is not sick for r in after.values())
    assert router.failovers == len(moved)
    # When it comes back (after its back-off), moved sessions stay where their cache now is.
    clock.now += router.backoff_s
    assert router.mark_up(sick)
    assert all(router.route(k) is after[k] for k in before)


def test_round_robin_moves_every_turn():
    router = Router(replicas(2), policy="round-robin")
    names = [router.route("session:a").name for _ in range(4)]
    assert names[0] != names[1] and names[0] == names[2] and names[1] == names[3]


def test_a_turn_tries_each_replica_once_then_gives_up_naming_them():
    router = Router(replicas(2))
    first = router.route("s")
    second = router.route("s", exclude=[first.name])
    assert second is not first
    with pytest.raises(UpstreamUnavailable) as caught:
        router.route("s", exclude=[first.name, second.name])
    assert first.name in caught.value.message and second.name in caught.value.message


def test_when_every_replica_is_out_of_rotation_they_are_still_tried():
    router = Router(replicas(2))
    for r in router.replicas:
        router.mark_down(r, "health check failed")
    assert router.route("s") in router.replicas


def test_dropped_connections_take_a_replica_out_at_once_and_500s_after_a_few():
    clock = Clock()
    router = Router(replicas(2), fail_threshold=3, cooloff_s=30, clock=clock)
    a, b = router.replicas
    router.began(a)
    router.failed(a, UpstreamLost("dropped"))
    assert not a.healthy and a.reason == "dropped"
    assert not router.mark_up(a)  # not straight back: it waits out its back-off
    clock.now += router.backoff_s
    assert router.mark_up(a)
    for _ in range(3):
        router.began(b)
        router.failed(b, UpstreamError("HTTP 500"))
    assert not b.healthy
    assert not router.mark_up(b)  # still cooling off
    clock.now += 31
    assert router.mark_up(b) and b.healthy


def test_client_mistakes_do_not_count_against_a_replica():
    router = Router(replicas(2))
    r = router.replicas[0]
    for _ in range(5):
        router.began(r)
        router.failed(r, None)
    assert r.healthy and r.errors == 5 and r.in_flight == 0


def test_the_last_replica_is_not_taken_out_for_500s():
    router = Router(replicas(1), fail_threshold=2)
    [r] = router.replicas
    for _ in range(4):
        router.began(r)
        router.failed(r, UpstreamError("HTTP 500"))
    assert r.healthy


def test_idle_sessions_are_forgotten_and_stop_counting_as_load():
    clock = Clock()
    router = Router(replicas(2), session_idle_s=60, clock=clock)
    for i in range(10):
        router.route(f"s{i}")
    assert router.sessions() == 10
    clock.now = 30
    router.route("s0")
    clock.now = 61
    router.route("fresh")
    assert router.sessions() == 2  # s0 (used at 30) and fresh
    assert sum(r.sessions for r in router.replicas) == 2


def test_usage_is_counted_per_replica():
    router = Router(replicas(2))
    r = router.route("s")
    router.began(r)
    router.succeeded(r, GenerationStats(prompt_tokens=100, cached_tokens=80))
    assert (r.requests, r.prompt_tokens, r.cached_tokens, r.in_flight) == (1, 100, 80, 0)
    assert Counter(x.requests for x in router.replicas) == Counter({1: 1, 0: 1})


def test_a_replica_that_keeps_leaving_waits_longer_each_time():
    clock = Clock()
    router = Router(replicas(2), backoff_s=1, backoff_max_s=8, clock=clock)
    a = router.replicas[0]
    waits = []
    for _ in range(6):  # sick on and off: down, back after its back-off, down again at once
        router.mark_down(a, "dropped")
        start = clock.now
        while not router.mark_up(a):
            clock.now += 0.25
        waits.append(clock.now - start)
    assert waits == [1, 2, 4, 8, 8, 8]
    router.began(a)
    router.succeeded(a, GenerationStats())  # it served a request: the back-off starts over
    router.mark_down(a, "dropped")
    clock.now += 1
    assert router.mark_up(a)
