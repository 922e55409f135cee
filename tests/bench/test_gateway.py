"""`whiz bench gateway` end to end on fake-engine replicas: both policies measured, no turn lost."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from whiz.bench.gateway import GatewayPlan, run_gateway_bench_async
from whiz.cli import app


async def test_the_bench_measures_both_policies_and_loses_no_turn_when_a_replica_dies():
    plan = GatewayPlan(sessions=3, history_tokens=200, rounds=1, model="fake", replica_threads=1)
    summary = await run_gateway_bench_async(plan)
    for policy in ("affinity", "round_robin"):
        assert summary[policy]["warm_turns"] == 3
        assert summary[policy]["warm_ttft_ms_median"] > 0
    assert summary["affinity"]["cached_ratio"] > 0.5
    assert summary["round_robin_over_affinity"] is not None
    failover = summary["failover"]
    assert failover["lost"] == 0 and failover["completed"] == failover["turns"] == 6
    assert failover["sessions_moved"] >= 1


def test_the_cli_prints_a_table_then_one_json_line():
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "gateway",
            "--model",
            "fake",
            "--sessions",
            "2",
            "--history-tokens",
            "100",
            "--rounds",
            "1",
            "--no-kill",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert "round-robin / affinity" in result.stdout
    summary = json.loads(lines[-1])
    assert summary["bench"] == "gateway" and summary["failover"] is None
