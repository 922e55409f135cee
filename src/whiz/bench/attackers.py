"""Hostile clients for `whiz bench soak --attack NAME`: they run beside the soak's honest clients
for the whole run, and each reports what it got back.

- `slowloris`: holds as many connections as it can, each with half a request head, reopening
  any the server closes (the 520 that once filled the 512-connection cap).
- `ping_flood`: WebSockets that send pings without end and never read (one once grew the server
  by 640 MB in 30 s).
- `cross_key`: with other keys, asks for the honest key's prompt prefix and reads its
  `cached_tokens` (through a gateway that once lost the tenant: 60 tokens readable).
- `grammar_bomb`: tool schemas whose `type` lists nest (a 772-byte one once froze the server for
  58 s), in turn one within the caps and one nested past the depth cap.
- `ambiguous_grammar`: nested `anyOf` `$defs` with a call required (a 3.4 KB one once gave another
  stream a 23.6 s gap), in turn one at the width cap (matched on every token) and one past it.
- `giant_prediction`: an 8 MB `prediction` with 8 output tokens (once an 11 s gap and 1.4 GB).

Each is one coroutine over a `Target`; `ATTACKERS` names them, and `run_attacker` runs one in a
process of its own. They connect from 127.0.0.2 to a server on 127.0.0.1 (the honest clients'
address), as attackers elsewhere would. An attacker never raises: what it met is its report.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

HALF_HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
ATTACKER_ADDRESS = "127.0.0.2"
SECRET = "Internal note, not for other tenants: the launch code is 7-4-1-9. " * 12


@dataclass
class Target:
    """Where the attackers aim, and the keys they hold."""

    root: str
    deadline: float
    """`time.monotonic()` at which they stop."""
    victim_key: str | None = None
    """The honest clients' key (`cross_key` sends the secret with it)."""
    attacker_key: str | None = None
    """Another valid key (the attackers that need one send it)."""
    probe_keys: tuple[str, ...] = ()
    """More valid keys, none used before: `cross_key` probes with a fresh one each round."""

    @property
    def address(self) -> tuple[str, int]:
        parts = urlsplit(self.root)
        return parts.hostname or "127.0.0.1", parts.port or 80

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def source(self) -> str | None:
        """The address the attackers connect from: another loopback address than the honest
        clients' 127.0.0.1 when the target is on 127.x, as attackers on other machines would
        (the server bounds some things per address: sharing the honest clients' would measure
        the bench, not the server)."""
        host = self.address[0]
        return ATTACKER_ADDRESS if host.startswith("127.") and host != ATTACKER_ADDRESS else None

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        source = self.source
        return await asyncio.open_connection(*self.address, local_addr=(source, 0) if source else None)

    def http(self, timeout: float | None) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(local_address=self.source)
        return httpx.AsyncClient(base_url=self.root, timeout=timeout, transport=transport)


async def slowloris(target: Target, connections: int = 600) -> dict[str, Any]:
    """Hold `connections` half-sent heads, reopening each one the server closes."""
    held: set[asyncio.StreamWriter] = set()
    report = {"connections": connections, "opened": 0, "held_peak": 0, "timed_out_408": 0, "closed": 0}

    async def one() -> None:
        while target.left_s() > 0:
            try:
                reader, writer = await target.connect()
            except OSError:
                await asyncio.sleep(0.1)
                continue
            report["opened"] += 1
            held.add(writer)
            report["held_peak"] = max(report["held_peak"], len(held))
            try:
                writer.write(HALF_HEAD)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, target.left_s())):
                        said = await reader.read(4096)
                        report["timed_out_408" if said.startswith(b"HTTP/1.1 408") else "closed"] += 1
            except OSError:
                report["closed"] += 1
            finally:
                held.discard(writer)
                writer.close()

    await asyncio.gather(*(one() for _ in range(connections)))
    return report


def _ping_frame() -> bytes:
    mask = os.urandom(4)
    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(b"p" * 125))
    return struct.pack("!BB", 0x89, 0x80 | 125) + mask + payload


async def ping_flood(target: Target, sockets: int = 2) -> dict[str, Any]:
    """`sockets` WebSockets that ping without end and read nothing, each reopened when closed."""
    report = {"sockets": sockets, "opened": 0, "closed_by_server": 0, "mb_sent": 0.0}
    burst = _ping_frame() * 512

    async def one() -> None:
        while target.left_s() > 0:
            try:
                reader, writer = await target.connect()
                key = base64.b64encode(os.urandom(16)).decode()
                auth = f"Authorization: Bearer {target.attacker_key}\r\n" if target.attacker_key else ""
                writer.write(
                    (
                        "GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                        f"{auth}\r\n"
                    ).encode()
                )
                await reader.readuntil(b"\r\n\r\n")  # the handshake; nothing after it is read
            except (OSError, asyncio.IncompleteReadError):
                await asyncio.sleep(0.1)
                continue
            report["opened"] += 1
            try:
                while target.left_s() > 0:
                    writer.write(burst)
                    async with asyncio.timeout(max(0.01, target.left_s())):
                        await writer.drain()
                    report["mb_sent"] += len(burst) / 1e6
            except (OSError, TimeoutError):
                if target.left_s() > 0:
                    report["closed_by_server"] += 1
            finally:
                writer.transport.abort()

    await asyncio.gather(*(one() for _ in range(sockets)))
    report["mb_sent"] = round(report["mb_sent"], 1)
    return report


async def cross_key(target: Target) -> dict[str, Any]:
    """Send a secret prompt with the victim's key, then probe its prefix with another key: the
    probe's `cached_tokens` is how much of the secret it can read (0 is the only right answer).

    Each round probes with a key that never sent anything before (`probe_keys`), so none of its
    cached tokens can be its own; and each round's secret starts with a fresh nonce, so the
    victim's cache of it is this round's. A probe proves something only while the secret is
    cached: `probes_with_secret_cached` counts those made after one of the victim's own repeats
    found most of its prompt in the cache (under load, the cache may have let it go already)."""
    if target.victim_key is None or not target.probe_keys:
        return {"skipped": "needs a victim key and probe keys (it runs behind the soak's own gateway)"}
    report: dict[str, Any] = {"probes": 0, "cached_tokens_max": 0, "victim_cached_tokens_max": 0}
    report["probes_with_secret_cached"] = 0

    async def cached(key: str, instructions: str, text: str) -> tuple[int, int] | None:
        """(cached tokens, prompt tokens) of one request, or None if it was not served."""
        body = {"instructions": instructions, "input": text, "max_output_tokens": 2}
        try:
            r = await http.post("/v1/responses", json=body, headers={"Authorization": f"Bearer {key}"})
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        usage = r.json()["usage"]
        return usage["input_tokens_details"]["cached_tokens"], usage["input_tokens"]

    async with target.http(timeout=120) as http:
        for probe_key in target.probe_keys:  # one fresh key a round; the run may end first
            if target.left_s() <= 0:
                break
            secret = f"[{os.urandom(6).hex()}] {SECRET}"
            # A gateway spreads requests without a session over its replicas: three from the
            # victim leave the secret on each of two, and show its own cache at work.
            held = False
            for _ in range(3):
                mine = await cached(target.victim_key, secret, "What is the launch code?")
                if mine is not None:
                    report["victim_cached_tokens_max"] = max(report["victim_cached_tokens_max"], mine[0])
                    held = held or mine[0] * 2 > mine[1]
            seen = await cached(probe_key, secret, "Repeat the note.")
            if seen is not None:
                report["probes"] += 1
                report["probes_with_secret_cached"] += held
                report["cached_tokens_max"] = max(report["cached_tokens_max"], seen[0])
            await asyncio.sleep(0.5)
    return report


def type_list_bomb(k: int = 6, d: int = 8, types: list[str] | None = None) -> dict:
    """`{"type": [k types], "properties": {"a": <the same again>}}`, d deep: walking each type's
    subschema again costs k^d. The defaults make ~770 bytes of JSON; `types` replaces the k
    "object"s with a list of its own."""
    schema: dict = {"type": "string"}
    for _ in range(d):
        schema = {"type": types or ["object"] * k, "properties": {"a": schema}}
    return schema


def nested_any_of(k: int = 4, d: int = 5) -> dict:
    """k `$defs` per level, each an object whose one property is an anyOf of the k defs below, d
    levels: k^d ways to read one call at once, each a stack the matcher checks on every token.
    The defaults make ~3.3 KB of JSON."""
    defs: dict = {}
    for level in range(d):
        for j in range(k):
            below = [{"$ref": f"#/$defs/L{level + 1}_{i}"} for i in range(k)]
            defs[f"L{level}_{j}"] = (
                {"type": "integer"}
                if level == d - 1
                else {"type": "object", "properties": {"a": {"anyOf": below}}, "required": ["a"]}
            )
    top = [{"$ref": f"#/$defs/L0_{i}"} for i in range(k)]
    return {"$defs": defs, "type": "object", "properties": {"x": {"anyOf": top}}, "required": ["x"]}


def tool_call_body(schema: dict, max_tokens: int = 24) -> bytes:
    """A Chat Completions request that offers one tool of `schema` and requires a call."""
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    body = {
        "messages": [{"role": "user", "content": "Call f."}],
        "tools": [tool],
        "tool_choice": "required",
        "max_tokens": max_tokens,
    }
    return json.dumps(body).encode()


ANSWER_GRACE_S = 60.0
"""How long past the run's end a request already sent may take to be answered."""


async def post_in_turn(target: Target, bodies: list[bytes], concurrency: int = 1) -> dict[str, Any]:
    """Send `bodies` to /v1/chat/completions in turn, `concurrency` at a time, until the deadline;
    report the status codes, the error codes, the `whiz` notes (with one example each) and the
    slowest answer."""
    report: dict[str, Any] = {"sent": 0, "status": Counter(), "error_codes": Counter(), "notes": {}}
    report["slowest_s"] = 0.0
    headers = {"Content-Type": "application/json"}
    key = target.attacker_key or target.victim_key
    if key:
        headers["Authorization"] = f"Bearer {key}"

    async def one(http: httpx.AsyncClient, start: int) -> None:
        i = start
        while target.left_s() > 0:
            t0 = time.monotonic()
            try:
                # One sent before the deadline gets its answer, as the honest turns do: a slow
                # answer is what this attacker is here to see.
                async with asyncio.timeout(max(ANSWER_GRACE_S, target.left_s())):
                    body = bodies[i % len(bodies)]
                    r = await http.post("/v1/chat/completions", content=body, headers=headers)
            except TimeoutError:
                report["status"]["no_answer"] += 1
                break
            except httpx.HTTPError as exc:
                report["status"][type(exc).__name__] += 1
                await asyncio.sleep(0.1)
                continue
            finally:
                i += 1
            report["sent"] += 1
            report["slowest_s"] = max(report["slowest_s"], time.monotonic() - t0)
            report["status"][str(r.status_code)] += 1
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                answer = r.json()
                if "error" in answer:
                    report["error_codes"][answer["error"].get("code") or answer["error"].get("type")] += 1
                for name, note in (answer.get("whiz") or {}).items():
                    if isinstance(note, str):
                        seen = report["notes"].setdefault(name, {"count": 0, "example": note[:120]})
                        seen["count"] += 1

    async with target.http(timeout=None) as http:
        await asyncio.gather(*(one(http, c) for c in range(concurrency)))
    report["status"] = dict(report["status"])
    report["error_codes"] = dict(report["error_codes"])
    report["slowest_s"] = round(report["slowest_s"], 2)
    return report


async def grammar_bomb(target: Target) -> dict[str, Any]:
    """Type-list bombs: the 772-byte one (a grammar of a few rules, served) and one nested past
    the depth cap (a 400 `tool_grammar_too_large`), in turn, two at a time."""
    bodies = [tool_call_body(type_list_bomb()), tool_call_body(type_list_bomb(d=20))]
    return await post_in_turn(target, bodies, concurrency=2)


async def ambiguous_grammar(target: Target) -> dict[str, Any]:
    """Nested anyOf `$defs`, a call required: 4 x 4 levels (256 ways to read a call, at the cap:
    served, its matching under the engine's grammar share) and 4 x 5 (past it: a 400), in turn,
    two at a time."""
    bodies = [tool_call_body(nested_any_of(4, 4)), tool_call_body(nested_any_of(4, 5))]
    return await post_in_turn(target, bodies, concurrency=2)


async def giant_prediction(target: Target) -> dict[str, Any]:
    """An 8 MB `prediction` with 8 output tokens, again and again (cut to the context window)."""
    body = {
        "messages": [{"role": "user", "content": "Repeat the file."}],
        "max_tokens": 8,
        "prediction": {"type": "content", "content": "def f():\n    return 1\n" * 350_000},  # 8 MB
    }
    return await post_in_turn(target, [json.dumps(body).encode()])


ATTACKERS: dict[str, Callable[[Target], Awaitable[dict[str, Any]]]] = {
    "slowloris": slowloris,
    "ping_flood": ping_flood,
    "cross_key": cross_key,
    "grammar_bomb": grammar_bomb,
    "ambiguous_grammar": ambiguous_grammar,
    "giant_prediction": giant_prediction,
}


def run_attacker(name: str, target: Target, idle: bool = True) -> dict[str, Any]:
    """One attacker to its end, in a process of its own (`ProcessPoolExecutor`), at idle priority
    (unless not `idle`): it gets only the CPU the bench's honest clients leave, as attackers on
    other machines take none of theirs. Else their gaps would measure the bench (honest clients
    waiting for a CPU the attackers hold), not the server."""
    if idle:
        yield_cpu()
    return asyncio.run(ATTACKERS[name](target))


def yield_cpu() -> None:
    """This process runs only when nothing else on its CPUs wants to (SCHED_IDLE; else nice 19)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or not allowed
        with contextlib.suppress(OSError):
            os.nice(19)
