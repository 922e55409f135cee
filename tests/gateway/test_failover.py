"""Two fake replicas behind a real gateway: affinity, health checks, and failover mid-session."""

from __future__ import annotations

import asyncio

import httpx

from whiz.client import ResponsesSocket, user_message


async def metric(root: str, name: str) -> float:
    async with httpx.AsyncClient() as client:
        text = (await client.get(root + "/metrics")).text
    return next(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


async def test_each_session_stays_on_one_replica_and_every_follow_up_is_cached(upstreams, gateway):
    a, b = upstreams(), upstreams()
    gw = gateway([a.url, b.url])
    socks = [await ResponsesSocket.open(gw.root) for _ in range(6)]
    try:
        last: list[str | None] = [None] * 6
        served: list[set[str]] = [set() for _ in range(6)]
        for turn in range(3):
            for i, sock in enumerate(socks):  # interleaved, as agents are
                t = await sock.run(
                    model="m", input=[user_message(f"s{i} t{turn}")], previous_response_id=last[i]
                )
                last[i] = t.id
                served[i].add(t.whiz["replica"])
                if turn > 0:
                    assert t.cached_tokens > 0, f"session {i} turn {turn} missed the cache"
    finally:
        for sock in socks:
            await sock.close()
    assert all(len(s) == 1 for s in served)
    assert {next(iter(s)) for s in served} == {a.url, b.url}  # new sessions were balanced
    assert await metric(gw.root, f'whiz_replica_cache_hit_ratio{{replica="{a.url}"}}') > 0.5


async def test_round_robin_moves_a_session_every_turn(upstreams, gateway):
    a, b = upstreams(), upstreams()
    gw = gateway([a.url, b.url], routing="round-robin")
    async with ResponsesSocket.connect(gw.root) as sock:
        replicas = []
        previous = None
        for i in range(4):
            t = await sock.run(model="m", input=[user_message(f"t{i}")], previous_response_id=previous)
            previous = t.id
            replicas.append(t.whiz["replica"])
    assert replicas[0] != replicas[1] and replicas[0] == replicas[2] and replicas[1] == replicas[3]


async def test_a_replica_that_died_between_turns_is_replaced_without_the_client_noticing(upstreams, gateway):
    a, b = upstreams(), upstreams()
    gw = gateway([a.url, b.url])
    servers = {a.url: a, b.url: b}
    async with ResponsesSocket.connect(gw.root) as sock:
        first = await sock.run(model="m", instructions="Sys.", input="remember 42")
        home = servers[first.whiz["replica"]]
        other = b if home is a else a
        home.server.stop()
        second = await sock.run(
            model="m", input=[user_message("what number?")], previous_response_id=first.id
        )
        third = await sock.run(model="m", input=[user_message("again")], previous_response_id=second.id)
    assert second.status == "completed" and second.whiz["replica"] == other.url
    # The new replica got the whole conversation, and it is warm from then on.
    assert [m["content"] for m in other.fake.bodies[0]["messages"]] == [
        "Sys.",
        "remember 42",
        "echo: remember 42",
        "what number?",
    ]
    assert second.cached_tokens == 0 and third.cached_tokens > 0
    assert await metric(gw.root, f'whiz_replica_healthy{{replica="{home.url}"}}') == 0
    assert await metric(gw.root, "whiz_gateway_failovers_total") >= 1


async def test_a_replica_dying_mid_response_costs_one_retried_turn_and_no_history(upstreams, gateway):
    a, b = upstreams(), upstreams()
    gw = gateway([a.url, b.url])
    servers = {a.url: a, b.url: b}
    async with ResponsesSocket.connect(gw.root) as sock:
        first = await sock.run(model="m", input="one")
        home = servers[first.whiz["replica"]]
        home.fake.mode = "die_mid"
        async for _ in sock.create(
            model="m", input=[user_message("two, a long one")], previous_response_id=first.id
        ):
            pass
        assert sock.last.status == "failed"
        assert sock.last.response["error"]["code"] == "upstream_lost"
        # The client sends the same turn again; it runs on the other replica with the full history.
        retry = await sock.run(
            model="m", input=[user_message("two, a long one")], previous_response_id=first.id
        )
        after = await sock.run(model="m", input=[user_message("three")], previous_response_id=retry.id)
    other = b if home is a else a
    assert retry.text == "echo: two, a long one" and retry.whiz["replica"] == other.url
    assert after.whiz["replica"] == other.url and after.cached_tokens > 0
    assert [m["content"] for m in other.fake.bodies[-1]["messages"]] == [
        "one",
        "echo: one",
        "two, a long one",
        "echo: two, a long one",
        "three",
    ]
    assert await metric(gw.root, "whiz_gateway_lost_turns_total") == 1


async def test_a_replica_failing_its_health_check_leaves_and_rejoins_the_rotation(upstreams, gateway):
    a, b = upstreams(), upstreams()
    gw = gateway([a.url, b.url], health_interval_s=0.1)
    a.fake.mode = "down"
    await until(lambda: not gw.gateway.router.replicas[0].healthy)
    async with ResponsesSocket.connect(gw.root) as sock:
        for i in range(6):  # every turn goes to the healthy replica
            t = await sock.run(model="m", input=f"new session {i}")
            assert t.whiz["replica"] == b.url
    a.fake.mode = "ok"
    await until(lambda: gw.gateway.router.replicas[0].healthy)


async def until(predicate, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    assert predicate()
