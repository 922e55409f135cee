"""`whiz bench soak`: a bounded load and fault test against a server on this machine.

For a fixed time, WebSocket sessions and HTTP clients run turns side by side while some of them
misbehave the way real clients do: they vanish mid-prefill (hang up before the first token) or
mid-decode (after a few chunks), and they send hostile input (deep JSON, lone surrogates, binary
frames, oversized stop lists). A good server answers every hostile input with a 4xx or an `error`
event, serves every well-behaved turn to its end, and goes idle soon after the last client left,
with its memory where it started.

It refuses any target that is not a loopback address: it is a stress test, not a tool to point
at someone else's server.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from rich.console import Console
from rich.table import Table
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from whiz.bench.report import rounded
from whiz.server.browser import is_loopback

LONG_PROMPT = "Explain this code line by line:\n" + "def f(x):\n    return x * 2\n" * 200
HOSTILE_HTTP: list[bytes] = [
    b"[" * 50_000 + b"]" * 50_000,
    b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
    b'{"messages": [{"role": "user", "content": "hi"}], "stop": ' + json.dumps(["x"] * 50).encode() + b"}",
    b'{"messages": [{"role": "user", "content": "hi"}], "n": 1000000}',
    b"\xff\xfe not json",
]
HOSTILE_WS: list[str | bytes] = [
    b"\x00\x01 binary frame",
    "[" * 50_000 + "]" * 50_000,
    '{"type": "response.create", "input": "\\ud800"}',
    '{"type": "response.create", "input": [{"type": "message", "role": "robot"}]}',
    "not json at all",
]
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
    turn_timeout_s: float = 60.0
    """A well-behaved turn that takes longer than this counts as lost."""


@dataclass
class Tally:
    served: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    """What went wrong, by kind: these are the server's faults (or the network's)."""
    rejected: int = 0
    """Hostile inputs answered with a 4xx or an error event, as they should be."""
    vanished: int = 0
    lost_turns: int = 0
    ttft_ms: list[float] = field(default_factory=list)


class Soak:
    def __init__(self, plan: SoakPlan):
        self.plan = plan
        self.root = plan.target.rstrip("/").removesuffix("/v1")
        self.tally = Tally()
        self.headers = {"Authorization": f"Bearer {plan.api_key}"} if plan.api_key else {}
        self.deadline = 0.0

    # -- one client's loop --------------------------------------------------------------------

    async def client(self, i: int, ws_first: bool) -> None:
        rng = random.Random(self.plan.seed * 1000 + i)
        async with httpx.AsyncClient(
            base_url=self.root, headers=self.headers, timeout=self.plan.turn_timeout_s
        ) as http:
            while time.monotonic() < self.deadline:
                kind = rng.choice(KINDS[1:2] * 3 + KINDS[2:] if ws_first else KINDS[:1] * 3 + KINDS[2:])
                try:
                    await getattr(self, kind)(http, rng)
                except (httpx.TimeoutException, TimeoutError):
                    self.tally.lost_turns += 1
                    self.tally.errors[f"{kind}: timeout"] += 1
                except (httpx.HTTPError, WebSocketException, OSError) as exc:
                    self.tally.errors[f"{kind}: {type(exc).__name__}"] += 1

    def chat_body(self, content: str, **extra: Any) -> dict:
        body = {
            "messages": [{"role": "user", "content": content}],
            "max_tokens": self.plan.max_tokens,
            **extra,
        }
        return {**body, "model": self.plan.model} if self.plan.model else body

    async def http_turn(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        t0 = time.perf_counter()
        body = self.chat_body(f"Write a haiku about the number {rng.randrange(1000)}.", stream=True)
        async with http.stream("POST", "/v1/chat/completions", json=body) as r:
            if r.status_code != 200:
                self.tally.errors[f"http_turn: HTTP {r.status_code}"] += 1
                return
            first = True
            async for line in r.aiter_lines():
                if first and line.startswith("data: {") and '"content": "' in line:
                    self.tally.ttft_ms.append((time.perf_counter() - t0) * 1000)
                    first = False
                if line == "data: [DONE]":
                    self.tally.served["http"] += 1
                    return
        self.tally.lost_turns += 1
        self.tally.errors["http_turn: stream ended without [DONE]"] += 1

    async def ws_turn(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        async with self.socket() as ws:
            previous = None
            for _ in range(rng.randint(1, 3)):  # a short conversation: follow-ups send only the new item
                t0 = time.perf_counter()
                event = {"type": "response.create", "input": f"Count to {rng.randint(2, 9)}.", "store": False}
                event["max_output_tokens"] = self.plan.max_tokens
                if previous:
                    event["previous_response_id"] = previous
                await ws.send(json.dumps(event))
                done = await self.until_terminal(ws, t0)
                if done is None:
                    return
                previous = done["response"]["id"]
                self.tally.served["ws"] += 1

    async def until_terminal(self, ws, t0: float) -> dict | None:  # noqa: ANN001
        first = True
        async with asyncio.timeout(self.plan.turn_timeout_s):
            while True:
                ev = json.loads(await ws.recv())
                if first and ev["type"] == "response.output_text.delta":
                    self.tally.ttft_ms.append((time.perf_counter() - t0) * 1000)
                    first = False
                if ev["type"] in ("response.completed", "response.incomplete"):
                    return ev
                if ev["type"] in ("response.failed", "error"):
                    code = (ev.get("error") or ev["response"].get("error") or {}).get("code")
                    self.tally.errors[f"ws_turn: {code}"] += 1
                    return None

    async def vanish_prefill(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        """Send a long prompt and hang up before the first token."""
        body = self.chat_body(LONG_PROMPT + str(rng.random()), stream=True)
        async with http.stream("POST", "/v1/chat/completions", json=body):
            pass  # leaving the block closes the connection, headers or not
        self.tally.vanished += 1

    async def vanish_decode(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        """Read a few chunks of a long reply, then hang up (HTTP or WebSocket, in turn)."""
        body = self.chat_body("Write a long story about a lighthouse.", stream=True, max_tokens=4096)
        if rng.random() < 0.5:
            async with http.stream("POST", "/v1/chat/completions", json=body) as r:
                lines = 0
                async for _ in r.aiter_lines():
                    lines += 1
                    if lines >= 6:
                        break
        else:
            async with self.socket() as ws:
                event = {"type": "response.create", "input": "Write a long story.", "max_output_tokens": 4096}
                await ws.send(json.dumps(event))
                for _ in range(4):
                    await asyncio.wait_for(ws.recv(), self.plan.turn_timeout_s)
        self.tally.vanished += 1

    async def hostile_http(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        raw = rng.choice(HOSTILE_HTTP)
        r = await http.post("/v1/chat/completions", content=raw, headers={"Content-Type": "application/json"})
        if 400 <= r.status_code < 500 and "error" in r.json():
            self.tally.rejected += 1
        else:
            self.tally.errors[f"hostile_http: HTTP {r.status_code}"] += 1

    async def hostile_ws(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        async with self.socket() as ws:
            await ws.send(rng.choice(HOSTILE_WS))
            ev = json.loads(await asyncio.wait_for(ws.recv(), self.plan.turn_timeout_s))
            if ev.get("type") != "error":
                self.tally.errors[f"hostile_ws: {ev.get('type')}"] += 1
                return
            self.tally.rejected += 1
            # The session goes on after an error: one good turn on the same socket proves it.
            await ws.send(json.dumps({"type": "response.create", "input": "ok", "max_output_tokens": 4}))
            if await self.until_terminal(ws, time.perf_counter()) is not None:
                self.tally.served["ws"] += 1

    def socket(self):  # noqa: ANN201
        url = self.root.replace("http", "ws", 1) + "/v1/responses"
        return connect(url, additional_headers=self.headers, max_size=None, open_timeout=10)

    # -- the server's state -------------------------------------------------------------------

    async def server_state(self, http: httpx.AsyncClient) -> tuple[int | None, float | None]:
        """(resident memory in bytes, requests running in the engine), where the server says."""
        rss = active = None
        try:
            for line in (await http.get("/metrics")).text.splitlines():
                if line.startswith("process_resident_memory_bytes "):
                    rss = int(float(line.split()[1]))
            load = (await http.get("/health")).json().get("load") or {}
            active = load.get("engine_active")
        except (httpx.HTTPError, ValueError):
            pass
        return rss, active

    async def idle_after_ms(
        self, http: httpx.AsyncClient, left_at: float, limit_s: float = 30.0
    ) -> float | None:
        """How long the engine kept working after the last client left (None: it does not say)."""
        while time.monotonic() - left_at < limit_s:
            _, active = await self.server_state(http)
            if active is None:
                return None
            if active == 0:
                return (time.monotonic() - left_at) * 1000
            await asyncio.sleep(0.02)
        return limit_s * 1000

    async def run(self) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self.root, headers=self.headers, timeout=10) as http:
            rss_before, _ = await self.server_state(http)
            self.deadline = time.monotonic() + self.plan.seconds
            clients = [self.client(i, ws_first=True) for i in range(self.plan.ws_sessions)]
            clients += [self.client(100 + i, ws_first=False) for i in range(self.plan.http_clients)]
            await asyncio.gather(*clients)
            left_at = time.monotonic()
            idle_ms = await self.idle_after_ms(http, left_at)
            rss_after, _ = await self.server_state(http)
        t = self.tally
        ttft = sorted(t.ttft_ms)
        return {
            "bench": "soak",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "target": self.root,
            "seconds": self.plan.seconds,
            "clients": {"ws": self.plan.ws_sessions, "http": self.plan.http_clients},
            "served": sum(t.served.values()),
            "served_by_transport": dict(t.served),
            "vanished": t.vanished,
            "hostile_rejected": t.rejected,
            "errors": dict(t.errors),
            "lost_turns": t.lost_turns,
            "ttft_ms_p50": statistics.median(ttft) if ttft else None,
            "ttft_ms_p99": ttft[min(len(ttft) - 1, int(len(ttft) * 0.99))] if ttft else None,
            "engine_idle_after_ms": idle_ms,
            "rss_mb_before": rss_before / 1e6 if rss_before else None,
            "rss_mb_after": rss_after / 1e6 if rss_after else None,
        }


def print_table(result: dict[str, Any], console: Console) -> None:
    table = Table("measure", "value", title=f"soak: {result['seconds']:g} s against {result['target']}")
    for key in (
        "served",
        "vanished",
        "hostile_rejected",
        "lost_turns",
        "ttft_ms_p50",
        "ttft_ms_p99",
        "engine_idle_after_ms",
        "rss_mb_before",
        "rss_mb_after",
    ):
        value = result[key]
        table.add_row(
            key, "n/a" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)
        )
    for kind, count in sorted(result["errors"].items()):
        table.add_row(f"error: {kind}", str(count))
    console.print(table)


def main(plan: SoakPlan) -> int:
    """Run the soak; print a table, then one JSON line. 0 when nothing was lost and nothing broke."""
    err = Console(stderr=True)
    host = urlsplit(plan.target).hostname or ""
    if not is_loopback(host):
        err.print(f"[red]error:[/red] soak runs against a server on this machine only, not {host!r}.")
        return 2
    if plan.seconds <= 0 or plan.ws_sessions < 0 or plan.http_clients < 0 or plan.seconds > 3600:
        err.print("[red]error:[/red] --seconds must be in (0, 3600] and the client counts >= 0.")
        return 2
    try:
        result = asyncio.run(Soak(plan).run())
    except httpx.ConnectError as exc:
        err.print(f"[red]error:[/red] cannot reach {plan.target}: {exc}")
        return 1
    print_table(result, Console())
    sys.stdout.write(json.dumps(rounded(result)) + "\n")
    return 0 if not result["lost_turns"] and not result["errors"] else 1
