"""`whiz bench soak`: a bounded load and fault test against a server on this machine.

For a fixed time, WebSocket sessions and HTTP clients run turns side by side while some of them
misbehave the way real clients do: they vanish mid-prefill (hang up before the first token) or
mid-decode (after a few chunks), and they send hostile input (deep JSON, lone surrogates, binary
frames, oversized stop lists). A good server answers every hostile input with a 4xx or an `error`
event, serves every well-behaved turn to its end, and goes idle soon after the last client left,
with its memory where it started.

A well-behaved turn ends served or lost. Served turns whose first token came later than the
bench's patience are counted apart as slow: on a busy CPU a turn can queue that long, and that is
a capacity figure, not a fault. Lost turns are the faults: an error, a stream cut short, or no end
at all within `hang_s` (hung).

With `--gateway` it starts its own cluster on loopback instead: two `whiz serve --engine-only`
replicas behind a gateway, and kills one replica (SIGKILL) partway through. A turn that fails
with `upstream_lost` is sent once more, as that error asks (a WebSocket follow-up with the whole
conversation: the failure evicted the response it continued); it is lost only if that fails too.

With `--attack NAME` (repeatable; `bench/attackers.py`), hostile clients run beside the honest
ones, and the report adds what each got back, the largest gap an honest stream saw between two
events, and the server's memory high-water mark: compare them with a run without attackers.
They connect from another loopback address than the honest clients, and `--cpus` /
`--server-cpus` keep the bench's own work off the server's cores, as in a deployment where the
clients are other machines (docs/limits-connections.md).

It refuses any target that is not a loopback address: it is a stress test, not a tool to point
at someone else's server.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import multiprocessing
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from rich.console import Console
from rich.table import Table
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from whiz.bench.attackers import ATTACKERS, Target, run_attacker
from whiz.bench.report import rounded, say
from whiz.errors import WhizError
from whiz.gateway.local import LocalCluster, LocalServer, kv_budget_mb
from whiz.server.browser import is_loopback

LONG_PROMPT = "Explain this code line by line:\n" + "def f(x):\n    return x * 2\n" * 200
HOSTILE_HTTP: list[bytes] = [
    b"[" * 50_000 + b"]" * 50_000,
    b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
    b'{"messages": [{"role": "user", "content": "hi"}], "stop": ' + json.dumps(["x"] * 50).encode() + b"}",
    b'{"messages": [{"role": "user", "content": "hi"}], "n": 1000000}',
    b"\xff\xfe not json",
    b'{"messages": [' + b"0," * 1_000_000 + b"0]}",  # a million values: once ~10 s and 1.6 GB
]
HOSTILE_WS: list[str | bytes] = [
    b"\x00\x01 binary frame",
    "[" * 50_000 + "]" * 50_000,
    '{"type": "response.create", "input": "\\ud800"}',
    '{"type": "response.create", "input": [{"type": "message", "role": "robot"}]}',
    "not json at all",
    '{"type": "response.create", "input": [' + "0," * 1_000_000 + "0]}",
]
PROBE_KEYS = 100
"""Keys the soak's gateway makes for `cross_key`: one a probe, so the probes' caches are empty."""
KINDS = ("http_turn", "ws_turn", "vanish_prefill", "vanish_decode", "hostile_http", "hostile_ws")


@dataclass
class SoakPlan:
    target: str = "http://127.0.0.1:8321"
    seconds: float = 30.0
    ws_sessions: int = 4
    http_clients: int = 4
    max_tokens: int = 48
    api_key: str | None = None
    model: str | None = None
    seed: int = 0
    patience_s: float = 60.0
    """A served turn whose first token came later than this counts as slow."""
    hang_s: float = 300.0
    """A turn with no end after this long is hung: lost."""
    gateway: bool = False
    """Start two replicas and a gateway on loopback (instead of using `target`), and kill one."""
    replica_model: str = "qwen2.5-coder-0.5b"
    replica_slots: int = 5
    replica_ctx: int = 8192
    kill_after_s: float | None = None
    """When one replica is killed, in seconds from the start (default: 40% of the run)."""
    attacks: tuple[str, ...] = ()
    """Hostile clients to run beside the honest ones (names in `bench.attackers.ATTACKERS`)."""
    attackers_idle: bool = True
    """Run them at idle priority (`attackers.run_attacker`); off where no CPU is idle (a loaded
    machine, a test run beside other work), where idle-priority attackers hardly run at all."""
    attacker_key: str | None = None
    """A second valid key, for the attackers (the soak's own gateway makes it)."""
    probe_keys: tuple[str, ...] = ()
    """Keys for `cross_key`'s probes, a fresh one each round (the soak's own gateway makes them)."""
    cpus: tuple[int, ...] = ()
    """Pin the bench (its honest clients and its attackers) to these CPUs; () leaves it free."""
    server_cpus: tuple[int, ...] = ()
    """With `gateway`: pin the replicas and the gateway to these CPUs. Apart from `cpus`, the
    clients' and attackers' own work cannot show up as the server's stalls, as in a deployment
    where they are other machines."""

    def replica_args(self) -> list[str]:
        if self.replica_model == "fake":  # the fake engine: no KV budget, no threads
            return ["--model", "fake", "--slots", str(self.replica_slots)]
        cores = len(self.server_cpus) or os.cpu_count() or 2
        threads = max(1, cores // 2)  # the two replicas share the cores
        kv_mb = kv_budget_mb(self.replica_slots, self.replica_ctx)
        return [
            "--model", self.replica_model, "--slots", str(self.replica_slots), "--ctx", str(self.replica_ctx),
            "--kv-budget-mb", str(kv_mb), "--threads", str(threads),
        ]  # fmt: skip


@dataclass
class Outcome:
    """How one attempt at a well-behaved turn ended."""

    failed: str | None = None
    """Why it was not served: an error code, `cut` (the stream ended early), `hung`, an exception."""
    ttft_ms: float | None = None
    """Its first token (or its end, for a reply without text), from when it was sent."""
    response_id: str | None = None
    text: str = ""
    """What a served WebSocket turn wrote, for a retry that must send the whole conversation."""


@dataclass
class Tally:
    served: Counter[str] = field(default_factory=Counter)
    slow: int = 0
    """Served turns whose first token came after the plan's patience: queued, not lost."""
    lost: Counter[str] = field(default_factory=Counter)
    """Well-behaved turns that were not served, by why."""
    retried: int = 0
    """Turns sent again after `upstream_lost` (a replica died under them)."""
    errors: Counter[str] = field(default_factory=Counter)
    """What went wrong, by kind: these are the server's faults (or the network's)."""
    rejected: int = 0
    """Hostile inputs answered with a 4xx or an error event, as they should be."""
    vanished: int = 0
    ttft_ms: list[float] = field(default_factory=list)
    gap_ms_max: float = 0.0
    """The longest wait between two events of an honest stream, once it had begun."""

    def event(self, last: float | None) -> float:
        """An honest stream's event arrived; `last` is when its previous one did. Returns now."""
        now = time.perf_counter()
        if last is not None:
            self.gap_ms_max = max(self.gap_ms_max, (now - last) * 1000)
        return now


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def error_code(raw: bytes) -> str | None:
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        return json.loads(raw)["error"].get("code")
    return None


class Soak:
    """One run against `root`; with `replicas` (behind a gateway at `root`), one of them is killed."""

    def __init__(self, plan: SoakPlan, root: str | None = None, replicas: Sequence[LocalServer] = ()):
        self.plan = plan
        self.root = (root or plan.target).rstrip("/").removesuffix("/v1")
        self.replicas = list(replicas)
        self.watched = [self.root] + [r.url for r in self.replicas]
        """The processes whose memory and engine load are read: the target, and any replicas."""
        self.killed: str | None = None
        self.tally = Tally()
        self.headers = {"Authorization": f"Bearer {plan.api_key}"} if plan.api_key else {}
        self.deadline = 0.0
        self.rss_peak = 0
        self.lag_ms_max = 0.0
        """The longest the bench's own event loop was late (its clients could not read meanwhile)."""
        self.probe_ms_max = 0.0
        """The longest the watched servers took to answer `/metrics` and `/health`."""

    # -- one client's loop --------------------------------------------------------------------

    async def client(self, i: int, ws_first: bool) -> None:
        rng = random.Random(self.plan.seed * 1000 + i)
        kinds = KINDS[1:2] * 3 + KINDS[2:] if ws_first else KINDS[:1] * 3 + KINDS[2:]
        async with httpx.AsyncClient(
            base_url=self.root, headers=self.headers, timeout=self.plan.hang_s
        ) as http:
            while time.monotonic() < self.deadline:
                kind = rng.choice(kinds)
                try:
                    await getattr(self, kind)(http, rng)
                except (httpx.HTTPError, WebSocketException, OSError, TimeoutError, ValueError) as exc:
                    self.tally.errors[f"{kind}: {type(exc).__name__}"] += 1

    async def turn(
        self,
        transport: str,
        attempt: Callable[[], Awaitable[Outcome]],
        again: Callable[[], Awaitable[Outcome]] | None = None,
    ) -> Outcome:
        """One well-behaved turn to its end, tallied as served (and maybe slow) or lost.

        After `upstream_lost` the turn is sent once more: by `again` where sending it the same way
        cannot work (a WebSocket continuation the failure evicted), else by `attempt`."""
        for retry in (False, True):
            try:
                async with asyncio.timeout(self.plan.hang_s):
                    outcome = await (again if retry and again is not None else attempt)()
            except TimeoutError:
                outcome = Outcome(failed="hung")
            except (httpx.HTTPError, WebSocketException, OSError, ValueError) as exc:
                outcome = Outcome(failed=type(exc).__name__)
            if outcome.failed != "upstream_lost" or retry:
                break
            self.tally.retried += 1  # its replica died mid-turn: send it again, as the error asks
        t = self.tally
        if outcome.failed:
            t.lost[outcome.failed] += 1
            t.errors[f"{transport} turn: {outcome.failed}"] += 1
            return outcome
        t.served[transport] += 1
        assert outcome.ttft_ms is not None
        t.ttft_ms.append(outcome.ttft_ms)
        if outcome.ttft_ms > self.plan.patience_s * 1000:
            t.slow += 1
        return outcome

    def chat_body(self, content: str, **extra: Any) -> dict:
        body = {
            "messages": [{"role": "user", "content": content}],
            "max_tokens": self.plan.max_tokens,
            **extra,
        }
        return {**body, "model": self.plan.model} if self.plan.model else body

    async def http_turn(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        body = self.chat_body(f"Write a haiku about the number {rng.randrange(1000)}.", stream=True)
        await self.turn("http", lambda: self.http_attempt(http, body))

    async def http_attempt(self, http: httpx.AsyncClient, body: dict) -> Outcome:
        t0 = time.perf_counter()
        first_ms = None
        last = None
        async with http.stream("POST", "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                return Outcome(failed=error_code(await r.aread()) or f"HTTP {r.status_code}")
            async for line in r.aiter_lines():
                if line:
                    last = self.tally.event(last)
                if line == "data: [DONE]":
                    return Outcome(ttft_ms=first_ms if first_ms is not None else ms_since(t0))
                if not line.startswith("data: "):
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:  # a failure after the stream began (OpenAI's way)
                    return Outcome(failed=chunk["error"].get("code") or "error")
                delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                if first_ms is None and (delta.get("content") or delta.get("tool_calls")):
                    first_ms = ms_since(t0)  # the first token, not the role chunk sent at once
        return Outcome(failed="cut")

    async def ws_turn(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        async with self.socket() as ws:
            previous = None
            history: list[dict] = []  # the conversation so far, as input items
            for _ in range(rng.randint(1, 3)):  # a short conversation: follow-ups send only the new item
                said = {"role": "user", "content": f"Count to {rng.randint(2, 9)}."}
                event = {"type": "response.create", "input": [said], "store": False}
                event["max_output_tokens"] = self.plan.max_tokens
                # A failed continuation evicts the response it continued from the connection, and
                # with `store: false` nothing else holds it (docs/protocol.md): the turn sent again
                # carries the whole conversation, as a client does on `previous_response_not_found`.
                whole = {**event, "input": [*history, said]}
                if previous:
                    event["previous_response_id"] = previous
                outcome = await self.turn(
                    "ws",
                    lambda e=event: self.ws_attempt(ws, e),
                    lambda e=whole: self.ws_attempt(ws, e),
                )
                if outcome.failed:
                    return
                previous = outcome.response_id
                history += [said, {"role": "assistant", "content": outcome.text}]

    async def ws_attempt(self, ws, event: dict) -> Outcome:  # noqa: ANN001
        t0 = time.perf_counter()
        first_ms = None
        last = None
        text: list[str] = []
        await ws.send(json.dumps(event))
        while True:
            ev = json.loads(await ws.recv())
            if ev.get("type") != "response.created":  # the stream begins at its first output
                last = self.tally.event(last)
            kind = ev.get("type")
            if kind == "response.output_text.delta":
                if first_ms is None:
                    first_ms = ms_since(t0)
                text.append(ev.get("delta") or "")
            if kind in ("response.completed", "response.incomplete"):
                ttft = first_ms if first_ms is not None else ms_since(t0)
                return Outcome(ttft_ms=ttft, response_id=ev["response"]["id"], text="".join(text))
            if kind == "error" or kind in ("response.failed", "response.cancelled"):
                error = ev.get("error") or (ev.get("response") or {}).get("error") or {}
                return Outcome(failed=error.get("code") or kind)

    async def vanish_prefill(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        """Send a long prompt and hang up before the first token."""
        body = self.chat_body(LONG_PROMPT + str(rng.random()), stream=True)
        with contextlib.suppress(TimeoutError):  # a client that gave up waiting vanished all the same
            async with (
                asyncio.timeout(self.plan.patience_s),
                http.stream("POST", "/v1/chat/completions", json=body),
            ):
                pass  # leaving the block closes the connection, headers or not
        self.tally.vanished += 1

    async def vanish_decode(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        """Read a few chunks of a long reply, then hang up (HTTP or WebSocket, in turn)."""
        body = self.chat_body("Write a long story about a lighthouse.", stream=True, max_tokens=4096)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.plan.patience_s):
                if rng.random() < 0.5:
                    async with http.stream("POST", "/v1/chat/completions", json=body) as r:
                        lines = 0
                        async for _ in r.aiter_lines():
                            lines += 1
                            if lines >= 6:
                                break
                else:
                    async with self.socket() as ws:
                        event = {
                            "type": "response.create",
                            "input": "Write a long story.",
                            "max_output_tokens": 4096,
                        }
                        await ws.send(json.dumps(event))
                        for _ in range(4):
                            await ws.recv()
        self.tally.vanished += 1

    async def hostile_http(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        raw = rng.choice(HOSTILE_HTTP)
        r = await http.post("/v1/chat/completions", content=raw, headers={"Content-Type": "application/json"})
        if 400 <= r.status_code < 500 and error_code(r.content) is not None:
            self.tally.rejected += 1
        else:
            self.tally.errors[f"hostile_http: HTTP {r.status_code}"] += 1

    async def hostile_ws(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        async with self.socket() as ws:
            await ws.send(rng.choice(HOSTILE_WS))
            ev = json.loads(await asyncio.wait_for(ws.recv(), self.plan.patience_s))
            if ev.get("type") != "error":
                self.tally.errors[f"hostile_ws: {ev.get('type')}"] += 1
                return
            self.tally.rejected += 1
            # The session goes on after an error: one good turn on the same socket proves it.
            ok = {"type": "response.create", "input": "ok", "max_output_tokens": 4}
            await self.turn("ws", lambda: self.ws_attempt(ws, ok))

    def socket(self):  # noqa: ANN201
        url = self.root.replace("http", "ws", 1) + "/v1/responses"
        # Opening is part of the turn: a socket that cannot open within `hang_s` is hung, while
        # `patience_s` only sorts served turns into prompt and slow.
        return connect(url, additional_headers=self.headers, max_size=None, open_timeout=self.plan.hang_s)

    # -- the replica killed behind the gateway ------------------------------------------------

    async def kill_one(self, after_s: float) -> None:
        """Kill the first replica (SIGKILL, as a crash or a power cut does) `after_s` into the run."""
        await asyncio.sleep(after_s)
        victim = self.replicas[0]
        await asyncio.to_thread(victim.kill)
        self.killed = victim.url
        self.watched.remove(victim.url)
        say(f"… killed replica {victim.url} {after_s:.0f} s into the run")

    # -- the servers' state -------------------------------------------------------------------

    async def server_state(self, http: httpx.AsyncClient) -> tuple[dict[str, int], float | None]:
        """(resident memory in bytes of each watched process, requests running in their engines),
        where they say (a gateway has no engine of its own)."""
        rss: dict[str, int] = {}
        active: float | None = None
        for root in self.watched:
            try:
                for line in (await http.get(f"{root}/metrics")).text.splitlines():
                    if line.startswith("process_resident_memory_bytes "):
                        rss[root] = int(float(line.split()[1]))
                load = (await http.get(f"{root}/health")).json().get("load") or {}
            except (httpx.HTTPError, ValueError):
                continue
            if "engine_active" in load:
                active = (active or 0) + load["engine_active"]
        return rss, active

    async def sample_rss(self, http: httpx.AsyncClient, every_s: float = 1.0) -> None:
        """The watched processes' memory, summed, at its highest during the run; and the longest
        the servers took to answer for it (their event loops' responsiveness)."""
        while True:
            t0 = time.perf_counter()
            rss, _ = await self.server_state(http)
            self.probe_ms_max = max(self.probe_ms_max, ms_since(t0))
            self.rss_peak = max(self.rss_peak, sum(rss.values()))
            await asyncio.sleep(every_s)

    async def watch_lag(self, every_s: float = 0.05) -> None:
        """How late this process's loop wakes from a short sleep: an honest stream's gap no longer
        than this may be the bench's own (a CPU it waited for), not the server's."""
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(every_s)
            self.lag_ms_max = max(self.lag_ms_max, (time.perf_counter() - t0 - every_s) * 1000)

    async def idle_after_ms(
        self, http: httpx.AsyncClient, left_at: float, limit_s: float = 30.0
    ) -> float | None:
        """How long the engines kept working after the last client left (None: they do not say)."""
        while time.monotonic() - left_at < limit_s:
            _, active = await self.server_state(http)
            if active is None:
                return None
            if active == 0:
                return (time.monotonic() - left_at) * 1000
            await asyncio.sleep(0.02)
        return limit_s * 1000

    async def run(self) -> dict[str, Any]:
        plan = self.plan
        async with httpx.AsyncClient(headers=self.headers, timeout=10) as http:
            rss_before, _ = await self.server_state(http)
            cpus = self.cpus()
            self.deadline = time.monotonic() + plan.seconds
            clients = [self.client(i, ws_first=True) for i in range(plan.ws_sessions)]
            clients += [self.client(100 + i, ws_first=False) for i in range(plan.http_clients)]
            kill_after_s = plan.kill_after_s if plan.kill_after_s is not None else plan.seconds * 0.4
            killer = asyncio.create_task(self.kill_one(kill_after_s)) if self.replicas else None
            target = Target(self.root, self.deadline, plan.api_key, plan.attacker_key, plan.probe_keys)
            loop = asyncio.get_running_loop()
            spawn = multiprocessing.get_context("spawn")  # not fork: this process has threads
            with ProcessPoolExecutor(max_workers=max(1, len(plan.attacks)), mp_context=spawn) as pool:
                attacks = {
                    name: loop.run_in_executor(pool, run_attacker, name, target, plan.attackers_idle)
                    for name in plan.attacks
                }
                sampler = asyncio.create_task(self.sample_rss(http))
                lag = asyncio.create_task(self.watch_lag())
                await asyncio.gather(*clients)
                if killer is not None and not killer.done():
                    killer.cancel()  # the run ended first: nothing was killed
                attacked = {name: await future for name, future in attacks.items()}
                sampler.cancel()
                lag.cancel()
            left_at = time.monotonic()
            idle_ms = await self.idle_after_ms(http, left_at)
            rss_after, _ = await self.server_state(http)
            counted = await self.gateway_counts(http) if self.replicas else {}
            sigterm_s = await self.sigterm_exit_s(http) if self.replicas else None
        t = self.tally
        ttft = sorted(t.ttft_ms)
        # Memory of the processes alive at both ends (a killed replica's is gone with it).
        before = sum(rss_before[r] for r in rss_after if r in rss_before)
        return {
            "bench": "soak",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "target": self.root,
            "seconds": plan.seconds,
            "clients": {"ws": plan.ws_sessions, "http": plan.http_clients},
            "served": sum(t.served.values()),
            "served_by_transport": dict(t.served),
            "slow_turns": t.slow,
            "patience_s": plan.patience_s,
            "lost_turns": sum(t.lost.values()),
            "lost_by_why": dict(t.lost),
            "hang_s": plan.hang_s,
            "retried_after_upstream_lost": t.retried,
            "vanished": t.vanished,
            "hostile_rejected": t.rejected,
            "errors": dict(t.errors),
            "ttft_ms_p50": statistics.median(ttft) if ttft else None,
            "ttft_ms_p99": ttft[min(len(ttft) - 1, int(len(ttft) * 0.99))] if ttft else None,
            "engine_idle_after_ms": idle_ms,
            "rss_mb_before": before / 1e6 if before else None,
            "rss_mb_after": sum(rss_after.values()) / 1e6 if rss_after else None,
            "rss_mb_by_process": {r: [rss_before.get(r, 0) / 1e6, rss_after[r] / 1e6] for r in rss_after},
            "rss_mb_peak": self.rss_peak / 1e6 if self.rss_peak else None,
            "honest_gap_ms_max": t.gap_ms_max,
            "bench_lag_ms_max": self.lag_ms_max,
            "server_probe_ms_max": self.probe_ms_max,
            "attackers": attacked,
            "cpus": cpus,
            "gateway": self.gateway_summary(kill_after_s, counted, sigterm_s),
        }

    def cpus(self) -> dict[str, Any]:
        """Where the bench runs, and (behind its own gateway) where its live replicas do."""
        where: dict[str, Any] = {"bench": sorted(os.sched_getaffinity(0))}
        for server in self.replicas:
            with contextlib.suppress(OSError):  # the killed one is gone
                where[server.url] = sorted(os.sched_getaffinity(server.proc.pid))
        return where

    async def gateway_counts(self, http: httpx.AsyncClient) -> dict[str, float]:
        """The gateway's own counts: turns it moved to another replica before they produced
        anything (no client saw those), failovers, and turns cut off mid-response."""
        try:
            load = (await http.get(f"{self.root}/health")).json().get("load") or {}
        except (httpx.HTTPError, ValueError):
            return {}
        names = ("gateway_retries_total", "gateway_failovers_total", "gateway_lost_turns_total")
        return {name.removeprefix("gateway_"): load[name] for name in names if name in load}

    async def sigterm_exit_s(self, http: httpx.AsyncClient, limit_s: float = 30.0) -> float | None:
        """SIGTERM to a live replica while it generates: seconds until the process exited (None if
        none is live; `limit_s` if it did not exit by then)."""
        survivor = next((r for r in self.replicas if r.proc.poll() is None), None)
        if survivor is None:
            return None
        body = self.chat_body("Write a long story about a lighthouse.", stream=True, max_tokens=4096)
        async with http.stream("POST", f"{survivor.url}/v1/chat/completions", json=body, timeout=None) as r:
            lines = r.aiter_lines()
            async for line in lines:
                if line.startswith("data: {") and '"content": ""' not in line and '"content"' in line:
                    break  # the first token: it is generating
            t0 = time.monotonic()
            survivor.proc.send_signal(signal.SIGTERM)
            # Read on, as a client still waiting for its answer does: one that stopped reading lets
            # the server end at once, which measures nothing (the grace is for readers).
            with contextlib.suppress(httpx.HTTPError):
                async for _ in lines:
                    pass
            try:
                await asyncio.to_thread(survivor.proc.wait, limit_s)
            except subprocess.TimeoutExpired:
                return limit_s
            return time.monotonic() - t0

    def gateway_summary(
        self, kill_after_s: float, counted: dict[str, float], sigterm_s: float | None
    ) -> dict[str, Any] | None:
        if not self.replicas:
            return None
        return {
            "replicas": len(self.replicas),
            "replica_args": self.plan.replica_args(),
            "killed": self.killed,
            "killed_after_s": kill_after_s if self.killed else None,
            "counted_by_the_gateway": counted,
            "sigterm_exit_s": sigterm_s,
        }


def pinned(cpus: tuple[int, ...], start: Callable[..., Any], *args: Any) -> Any:
    """`start(*args)` with this thread pinned to `cpus`, so the processes it starts are (a child
    takes its affinity from the thread that forked it); the thread's own is restored after."""
    if not cpus:
        return start(*args)
    own = os.sched_getaffinity(0)  # 0: this thread, on Linux
    os.sched_setaffinity(0, cpus)
    try:
        return start(*args)
    finally:
        os.sched_setaffinity(0, own)


def parse_cpus(text: str) -> tuple[int, ...]:
    """`0`, `0,2` or `0-3` (as taskset -c reads them) to CPU numbers; ValueError if malformed."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if first < 0 or last < first:
            raise ValueError(part)
        cpus.update(range(first, last + 1))
    if not cpus:
        raise ValueError(text)
    return tuple(sorted(cpus))


async def run_behind_gateway(plan: SoakPlan) -> dict[str, Any]:
    """Two replicas and a gateway on loopback, the soak through the gateway, then all stopped."""
    with tempfile.TemporaryDirectory(prefix="whiz-soak-") as logs, LocalCluster(Path(logs)) as cluster:
        say(f"… starting 2 replicas: whiz serve --engine-only {' '.join(plan.replica_args())}")
        await asyncio.to_thread(pinned, plan.server_cpus, cluster.start_replicas, 2, plan.replica_args())
        keys: list[str] = []
        if "cross_key" in plan.attacks:  # two tenants: the honest clients' and the prober's
            probes = tuple(f"soak-probe-{i}" for i in range(PROBE_KEYS))
            plan = replace(
                plan, api_key=plan.api_key or "soak-honest", attacker_key="soak-attacker", probe_keys=probes
            )
            keys = [a for key in (plan.api_key, plan.attacker_key, *probes) for a in ("--api-key", key)]
        gateway = await asyncio.to_thread(pinned, plan.server_cpus, cluster.start_gateway, "affinity", keys)
        say(f"… gateway at {gateway.url}; soaking for {plan.seconds:g} s")
        return await Soak(plan, gateway.url, cluster.replicas).run()


ROWS = (
    ("served", "well-behaved turns served to their end"),
    ("slow_turns", "served, first token after the patience"),
    ("lost_turns", "failed, cut short or hung"),
    ("retried_after_upstream_lost", "sent again after their replica died"),
    ("vanished", "clients that hung up mid-prefill or mid-decode"),
    ("hostile_rejected", "hostile inputs answered with a 4xx or an error event"),
    ("ttft_ms_p50", ""),
    ("ttft_ms_p99", ""),
    ("engine_idle_after_ms", "after the last client left"),
    ("rss_mb_before", ""),
    ("rss_mb_after", ""),
    ("rss_mb_peak", "sampled every second"),
    ("honest_gap_ms_max", "longest wait between two events of an honest stream"),
    ("bench_lag_ms_max", "longest the bench's own loop was late: gaps this long may be its own"),
    ("server_probe_ms_max", "longest the server took to answer /metrics and /health, polled each second"),
)


def print_table(result: dict[str, Any], console: Console) -> None:
    where = result["target"] + (" (a gateway over 2 replicas, one killed)" if result["gateway"] else "")
    table = Table("measure", "value", "note", title=f"soak: {result['seconds']:g} s against {where}")
    notes = {
        "slow_turns": f"first token after {result['patience_s']:g} s",
        "lost_turns": f"no end within {result['hang_s']:g} s counts as hung",
    }
    for key, note in ROWS:
        value = result[key]
        shown = "n/a" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)
        table.add_row(key, shown, notes.get(key, note))
    for name, report in result["attackers"].items():
        table.add_row(f"attacker: {name}", json.dumps(report), "what it got back")
    for why, count in sorted(result["lost_by_why"].items()):
        table.add_row(f"lost: {why}", str(count), "")
    for kind, count in sorted(result["errors"].items()):
        table.add_row(f"error: {kind}", str(count), "")
    gateway = result["gateway"]
    if gateway:
        killed = f"{gateway['killed']} at {gateway['killed_after_s']:g} s" if gateway["killed"] else "none"
        table.add_row("replica killed", killed, " ".join(gateway["replica_args"]))
        said = {
            "retries_total": "turns moved to the other replica before any output (unseen by clients)",
            "failovers_total": "sessions moved off a replica that failed",
            "lost_turns_total": "turns cut off mid-response (their clients sent them again)",
        }
        for name, count in gateway["counted_by_the_gateway"].items():
            table.add_row(f"gateway: {name}", f"{count:g}", said.get(name, ""))
        exit_s = gateway["sigterm_exit_s"]
        table.add_row(
            "SIGTERM mid-generation: exit after",
            "n/a" if exit_s is None else f"{exit_s:.2f} s",
            "the live replica, at the end (target: 5 s)",
        )
    console.print(table)


def main(plan: SoakPlan) -> int:
    """Run the soak; print a table, then one JSON line. 0 when nothing was lost and nothing broke."""
    err = Console(stderr=True)
    host = urlsplit(plan.target).hostname or ""
    if not plan.gateway and not is_loopback(host):
        err.print(f"[red]error:[/red] soak runs against a server on this machine only, not {host!r}.")
        return 2
    if plan.seconds <= 0 or plan.ws_sessions < 0 or plan.http_clients < 0 or plan.seconds > 3600:
        err.print("[red]error:[/red] --seconds must be in (0, 3600] and the client counts >= 0.")
        return 2
    unknown = [name for name in plan.attacks if name not in ATTACKERS]
    if unknown:
        err.print(f"[red]error:[/red] no attacker {unknown[0]!r}; there are {', '.join(ATTACKERS)}.")
        return 2
    usable = os.sched_getaffinity(0)
    for option, cpus in (("--cpus", plan.cpus), ("--server-cpus", plan.server_cpus)):
        if not set(cpus) <= usable:
            missing = min(set(cpus) - usable)
            err.print(f"[red]error:[/red] {option}: no CPU {missing} here; usable: {sorted(usable)}.")
            return 2
    if plan.server_cpus and not plan.gateway:
        err.print(
            "[red]error:[/red] --server-cpus pins the cluster --gateway starts; pin your own "
            "server with taskset -c (see docs/limits-connections.md)."
        )
        return 2
    if plan.cpus:
        os.sched_setaffinity(0, plan.cpus)  # before any thread or attacker process: they inherit it
    try:
        result = asyncio.run(run_behind_gateway(plan) if plan.gateway else Soak(plan).run())
    except httpx.ConnectError as exc:
        err.print(f"[red]error:[/red] cannot reach {plan.target}: {exc}")
        return 1
    except WhizError as exc:  # a replica or the gateway did not start
        err.print(f"[red]error:[/red] {exc.message}")
        return 2
    print_table(result, Console(width=None if sys.stdout.isatty() else 160))
    sys.stdout.write(json.dumps(rounded(result)) + "\n")
    return 0 if not result["lost_turns"] and not result["errors"] else 1
