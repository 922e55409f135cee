"""Two real whiz engine replicas behind a real gateway, all `whiz serve` processes on loopback.

What only real replicas show: follow-up turns really find their history in the replica's KV
cache (cached_tokens), and killing a replica's process mid-session moves the session to the other
replica with its whole history, so the model still knows what was said before.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from whiz.client import ResponsesSocket, user_message
from whiz.errors import WhizError
from whiz.gateway.local import LocalCluster, LocalServer

pytestmark = pytest.mark.model

REPLICA_ARGS = ["--ctx", "2048", "--slots", "2", "--kv-budget-mb", "128", "--threads", "1"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, dict[str, LocalServer]]]:
    """Two replicas and a gateway in front of them: (gateway URL, {replica URL: server})."""
    log_dir = Path(os.environ.get("TMPDIR", "/tmp"))
    with LocalCluster(log_dir) as local:
        try:
            replicas = local.start_replicas(2, REPLICA_ARGS)  # loading side by side, a thread each
            gateway = local.start_gateway("affinity")
        except WhizError as exc:
            pytest.fail(exc.message)
        yield gateway.url, {r.url: r for r in replicas}


async def test_every_follow_up_turn_finds_its_history_in_its_replicas_cache(cluster):
    root, _ = cluster
    socks = [await ResponsesSocket.open(root) for _ in range(2)]
    try:
        last: list[str | None] = [None, None]
        homes: list[set[str]] = [set(), set()]
        for turn in range(3):
            for i, sock in enumerate(socks):
                t = await sock.run(
                    model="whiz",
                    instructions=f"You are assistant number {i}. Answer in at most five words.",
                    input=[user_message(f"Name a fruit, then the number {turn}.")],
                    previous_response_id=last[i],
                    max_output_tokens=8,
                    temperature=0,
                )
                last[i] = t.id
                homes[i].add(t.whiz["replica"])
                if turn > 0:
                    assert t.cached_tokens > 0, f"session {i}, turn {turn}: nothing cached"
                    assert t.cached_tokens >= t.input_tokens // 2
    finally:
        for sock in socks:
            await sock.close()
    assert all(len(h) == 1 for h in homes), homes


async def test_killing_the_replica_mid_response_moves_the_session_with_its_history(cluster):
    root, replicas = cluster
    async with ResponsesSocket.connect(root) as sock:
        first = await sock.run(
            model="whiz",
            instructions="You are terse.",
            input="My name is Zorblax. Reply OK.",
            max_output_tokens=8,
            temperature=0,
        )
        home = first.whiz["replica"]
        deltas = 0
        ask = [user_message("Count from 1 to 60, comma separated.")]
        async for event in sock.create(
            model="whiz", input=ask, previous_response_id=first.id, max_output_tokens=200, temperature=0
        ):
            if event["type"] == "response.output_text.delta":
                deltas += 1
                if deltas == 3:
                    replicas[home].proc.send_signal(signal.SIGKILL)
        assert sock.last.status == "failed"
        assert sock.last.response["error"]["code"] == "upstream_lost"
        # The client sends the same turn again, as the error says; another replica runs it.
        retry = await sock.run(
            model="whiz", input=ask, previous_response_id=first.id, max_output_tokens=12, temperature=0
        )
        assert retry.status in ("completed", "incomplete") and retry.whiz["replica"] != home
        assert retry.input_tokens > first.input_tokens  # the whole history was sent
        name = await sock.run(
            model="whiz",
            input=[user_message("What is my name? One word.")],
            previous_response_id=retry.id,
            max_output_tokens=8,
            temperature=0,
        )
    assert "Zorblax" in name.text
    assert name.whiz["replica"] == retry.whiz["replica"] and name.cached_tokens > 0
