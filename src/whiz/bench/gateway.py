"""`whiz bench gateway`: session affinity against round-robin, and a replica killed mid-run.

Two local whiz engine replicas (`whiz serve --engine-only`, the real model) run behind two
gateways over the same replicas: one routes with session affinity, the other round-robin. Through
each, `sessions` WebSocket sessions, each primed with about `history_tokens` tokens of history,
take turns one at a time in a shuffled order for `rounds` rounds. The table compares their
warm-turn TTFT (the gateway's own figure, which includes the hop to the replica), measured in the
same run. Each replica has KV slots for its fair share of the sessions only, as a deployment sized
for its load would: with affinity every session stays warm on its replica, while round-robin sends
every session to both replicas, which then evict one another's sessions.

Then, through the affinity gateway, one more round kills (SIGKILL) the replica serving the round's
first session while that turn is streaming; a turn that fails with `upstream_lost` is sent again
once, as the error asks, and a last round shows every session going on. No turn may be lost.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import os
import random
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from whiz.bench.corpus import SYSTEM_TEXT, Corpus, nonce
from whiz.bench.report import rounded
from whiz.client import ClientError, Exchange, ResponseFailed, ResponsesSocket, user_message
from whiz.errors import WhizError
from whiz.gateway.local import LocalCluster, LocalServer, kv_budget_mb

Progress = Callable[[str], None]
TARGET_RATIO = 3.0


@dataclass(frozen=True)
class GatewayPlan:
    """The sizes of one run."""

    sessions: int = 8
    history_tokens: int = 2000
    rounds: int = 2
    """Measured rounds per routing policy (after one unmeasured round that loads the cache)."""
    reply_tokens: int = 8
    model: str = "qwen2.5-coder-0.5b"
    replica_threads: int | None = None
    """llama.cpp threads per replica (default: half the cores each)."""
    kill: bool = True
    seed: int = 0

    def replica_args(self) -> list[str]:
        slots = max(1, math.ceil(self.sessions / 2))  # a fair share each: affinity fits, round-robin does not
        ctx = self.history_tokens * 3 // 2 + (self.rounds + 4) * (self.reply_tokens + 64) + 512
        ctx = (ctx + 255) // 256 * 256
        threads = self.replica_threads or max(1, (os.cpu_count() or 2) // 2)
        if self.model == "fake":  # one token per byte: the fake engine's own 8k window, no KV budget
            return ["--model", "fake", "--slots", str(slots)]
        return [
            "--model", self.model, "--ctx", str(ctx), "--slots", str(slots),
            "--kv-budget-mb", str(kv_budget_mb(slots, ctx)), "--threads", str(threads),
        ]  # fmt: skip


class BenchSession:
    """One WebSocket session through a gateway: primed with history, then one turn at a time."""

    def __init__(self, sock: ResponsesSocket, model: str):
        self.sock = sock
        self.model = model
        self.last_id: str | None = None
        self.home: str | None = None
        """The replica that ran its latest turn."""

    async def prime(self, history: list[dict[str, Any]]) -> None:
        turn = await self.sock.run(model=self.model, instructions=SYSTEM_TEXT, input=history, generate=False)
        self.last_id = turn.id

    async def say(
        self, text: str, max_tokens: int, on_first_delta: Callable[[], None] | None = None
    ) -> Exchange:
        """One user turn; raises `ResponseFailed` if it failed (the conversation is then unchanged)."""
        input_ = [{"type": "message", "role": "user", "content": text}]
        body = {"model": self.model, "input": input_, "max_output_tokens": max_tokens, "temperature": 0}
        async for event in self.sock.create(previous_response_id=self.last_id, **body):
            if on_first_delta is not None and event["type"] == "response.output_text.delta":
                on_first_delta()
                on_first_delta = None
        turn = self.sock.last
        assert turn is not None
        if turn.status == "failed":
            error = (turn.response or {}).get("error") or {}
            raise ResponseFailed(error.get("message") or "the turn failed", code=error.get("code"))
        self.last_id = turn.id
        self.home = turn.whiz.get("replica")
        return turn


@dataclass
class Phase:
    """What one routing policy measured."""

    routing: str
    ttft_ms: list[float] = field(default_factory=list)
    input_tokens: int = 0
    cached_tokens: int = 0

    def add(self, turn: Exchange) -> None:
        self.ttft_ms.append(turn.ttft_ms)
        self.input_tokens += turn.input_tokens or 0
        self.cached_tokens += turn.cached_tokens or 0

    def summary(self) -> dict[str, Any]:
        ttft = sorted(self.ttft_ms)
        return {
            "warm_ttft_ms_median": statistics.median(ttft) if ttft else None,
            "warm_ttft_ms_p90": ttft[min(len(ttft) - 1, int(len(ttft) * 0.9))] if ttft else None,
            "warm_turns": len(ttft),
            "cached_ratio": self.cached_tokens / self.input_tokens if self.input_tokens else None,
        }


class GatewayBench:
    """One run: the cluster, both policies, the kill round."""

    def __init__(self, plan: GatewayPlan, progress: Progress):
        self.plan = plan
        self.progress = progress
        self.corpus = Corpus(seed=plan.seed)
        self.rng = random.Random(plan.seed)
        self.phases: dict[str, Phase] = {}
        self.failover: dict[str, Any] | None = None
        self.notes: list[str] = []

    async def open_sessions(self, gateway: LocalServer) -> list[BenchSession]:
        sessions = []
        for _ in range(self.plan.sessions):
            sessions.append(BenchSession(await ResponsesSocket.open(gateway.url), self.plan.model))
        for s in sessions:  # answered at once; the replicas prefill in the background
            history = self.corpus.history(self.plan.history_tokens) or [user_message("Let's begin.")]
            history[0]["content"] = nonce() + " " + history[0]["content"]  # no shared cache between runs
            await s.prime(history)
        return sessions

    async def run_policy(self, gateway: LocalServer, routing: str) -> list[BenchSession]:
        plan = self.plan
        phase = self.phases[routing] = Phase(routing)
        self.progress(f"{routing}: priming {plan.sessions} sessions with ~{plan.history_tokens} tokens each")
        sessions = await self.open_sessions(gateway)
        for r in range(plan.rounds + 1):
            self.progress(
                f"{routing}: round {r + 1} of {plan.rounds + 1}" + (" (loads the cache)" if r == 0 else "")
            )
            for i in self.rng.sample(range(len(sessions)), len(sessions)):
                turn = await sessions[i].say(self.corpus.question(), plan.reply_tokens)
                if r > 0:
                    phase.add(turn)
        return sessions

    async def kill_round(self, cluster: LocalCluster, sessions: list[BenchSession]) -> None:
        """Kill the replica of the round's first session while its turn streams; count every turn."""
        order = self.rng.sample(range(len(sessions)), len(sessions))
        victim_url = sessions[order[0]].home
        victim = next(r for r in cluster.replicas if r.url == victim_url)
        moved = sum(1 for s in sessions if s.home == victim_url)
        stats = {
            "killed": victim_url,
            "sessions_moved": moved,
            "turns": 0,
            "completed": 0,
            "retried": 0,
            "lost": 0,
        }
        first_after_ms: list[float] = []
        self.progress(f"failover: killing {victim_url} mid-turn, then two rounds")
        for r in range(2):
            for n, i in enumerate(order if r == 0 else self.rng.sample(order, len(order))):
                session = sessions[i]
                was_home = session.home
                kill = victim.kill if (r == 0 and n == 0) else None
                stats["turns"] += 1
                tokens = max(32, self.plan.reply_tokens) if kill else self.plan.reply_tokens
                question = self.corpus.question()
                try:
                    try:
                        turn = await session.say(question, tokens, on_first_delta=kill)
                    except ResponseFailed as exc:
                        if exc.code != "upstream_lost":
                            raise
                        stats["retried"] += 1
                        turn = await session.say(question, tokens)  # the same turn, again
                except ClientError as exc:
                    stats["lost"] += 1
                    self.notes.append(f"failover: a turn was lost: {exc}")
                    continue
                stats["completed"] += 1
                if was_home == victim_url and session.home != victim_url and r == 0:
                    first_after_ms.append(turn.ttft_ms)
        stats["first_turn_after_move_ttft_ms_median"] = (
            statistics.median(first_after_ms) if first_after_ms else None
        )
        self.failover = stats

    async def run(self, cluster: LocalCluster) -> None:
        plan = self.plan
        self.progress(f"starting 2 replicas: whiz serve --engine-only {' '.join(plan.replica_args())}")
        cluster.start_replicas(2, plan.replica_args())
        round_robin = cluster.start_gateway("round-robin")
        affinity = cluster.start_gateway("affinity")
        # Round-robin first: the affinity run's sessions are the ones left warm for the kill round.
        for s in await self.run_policy(round_robin, "round-robin"):
            await s.sock.close()
        sessions = await self.run_policy(affinity, "affinity")
        try:
            if plan.kill:
                await self.kill_round(cluster, sessions)
        finally:
            for s in sessions:
                await s.sock.close()

    def summary(self) -> dict[str, Any]:
        aff = self.phases.get("affinity", Phase("affinity")).summary()
        rr = self.phases.get("round-robin", Phase("round-robin")).summary()
        a, b = aff["warm_ttft_ms_median"], rr["warm_ttft_ms_median"]
        ratio = round(b / a, 3) if a and b else None
        return rounded(
            {
                "bench": "gateway",
                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "model": self.plan.model,
                "replicas": 2,
                "sessions": self.plan.sessions,
                "history_tokens": self.plan.history_tokens,
                "rounds": self.plan.rounds,
                "replica_args": self.plan.replica_args(),
                "affinity": aff,
                "round_robin": rr,
                "round_robin_over_affinity": ratio,
                "target_ratio": TARGET_RATIO,
                "failover": self.failover,
                "notes": self.notes,
            }
        )


def print_report(summary: dict[str, Any], console: Console | None = None) -> None:
    """The table for people, then the summary as the last line of stdout."""
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    sizes = f"{summary['sessions']} sessions × ~{summary['history_tokens']} tokens"
    title = f"whiz bench gateway — 2 replicas, {sizes}"
    table = Table("measurement", "value", "note", title=title)

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:,.1f} ms"

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.0%} of input cached"

    for key, label in (("affinity", "affinity"), ("round_robin", "round-robin")):
        phase = summary[key]
        table.add_row(
            f"warm-turn TTFT, {label} (median)", ms(phase["warm_ttft_ms_median"]), pct(phase["cached_ratio"])
        )
        table.add_row(
            f"warm-turn TTFT, {label} (p90)", ms(phase["warm_ttft_ms_p90"]), f"{phase['warm_turns']} turns"
        )
    ratio = summary["round_robin_over_affinity"]
    table.add_row(
        "round-robin / affinity", "-" if ratio is None else f"{ratio:.2f}x", f"target ≥ {TARGET_RATIO:g}x"
    )
    fo = summary["failover"]
    if fo:
        table.add_row(
            "replica killed mid-turn: turns completed",
            f"{fo['completed']} of {fo['turns']}",
            f"{fo['lost']} lost, {fo['retried']} sent again after upstream_lost, "
            f"{fo['sessions_moved']} sessions moved",
        )
        table.add_row(
            "first turn on the new replica (median)",
            ms(fo["first_turn_after_move_ttft_ms_median"]),
            "cold: full history prefilled",
        )
    console.print(table)
    for note in summary["notes"]:
        console.print(f"note: {note}", highlight=False)
    print(json.dumps(summary), flush=True)


async def run_gateway_bench_async(plan: GatewayPlan, progress: Progress | None = None) -> dict[str, Any]:
    """Start the cluster, run everything, stop the cluster; returns the JSON summary."""
    bench = GatewayBench(plan, progress or (lambda _: None))
    with (
        tempfile.TemporaryDirectory(prefix="whiz-bench-gateway-") as logs,
        LocalCluster(Path(logs)) as cluster,
    ):
        await bench.run(cluster)
    return bench.summary()


def main(plan: GatewayPlan) -> int:
    """`whiz bench gateway`: 0 when no turn was lost, 1 otherwise or when the cluster failed."""

    def progress(message: str) -> None:
        print(f"… {message}", file=sys.stderr, flush=True)

    try:
        summary = asyncio.run(run_gateway_bench_async(plan, progress))
    except (ClientError, WhizError) as exc:
        print(f"whiz bench gateway: {exc.message}", file=sys.stderr)
        return 1
    print_report(summary)
    return 1 if summary["failover"] and summary["failover"]["lost"] else 0
