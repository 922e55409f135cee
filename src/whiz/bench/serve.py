"""`whiz bench serve`: how fast a server answers the turns a coding agent actually makes.

It measures time to first token (TTFT) for a cold first turn, for warm follow-ups as history grows
(WebSocket mode, sending only the new message, against HTTP chat completions resending everything),
for sessions that interleave, and for a new session over an already-seen prefix; then decode speed
and the fixed cost of one round trip. It works against whiz or any OpenAI-compatible server; rows
that need WebSocket mode are skipped, and say so, where the server has none. Server-reported `whiz`
timings are used where present, client wall time otherwise, and each row says which.

Last, the first turn's wait where a process is new (`first_turn.py`), with the model the target
serves loaded here: a long prefix cold, from memory and from disk after a restart, and `whiz exec`
from a fresh process with and without the background server.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import subprocess
import sys
from typing import Any

from whiz.bench.first_turn import FirstTurnPlan, add_first_turn
from whiz.bench.measures import Plan, Progress, ServeBench, ratio, size_label
from whiz.bench.report import Row, print_report, rounded
from whiz.client import ClientError, ConnectError


def add_raw_baseline(bench: ServeBench, model_path: str) -> None:
    """Decode speed of plain llama-cpp-python on the same file, and whiz's share of it.

    It runs in a child process: a llama.cpp build that crashes (an illegal instruction on an
    unsupported CPU) or runs out of memory must not take the results measured so far with it.
    """
    bench.progress("raw llama-cpp-python decode baseline")
    code = (
        "import sys; from whiz.bench.raw import raw_llama_decode_tokens_per_s as f; "
        f"print(f(sys.argv[1], {os.cpu_count() or 4}))"
    )
    command = [sys.executable, "-c", code, model_path]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    try:
        raw = float(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        bench.notes.append(f"raw baseline skipped: {why}")
        bench.rows.append(Row("decode, raw llama-cpp-python", "in-process", None, note="could not run"))
        return
    share = ratio(bench.summary.get("decode_tokens_per_s"), raw)
    bench.summary["raw_decode_tokens_per_s"] = raw
    bench.summary["decode_over_raw"] = share
    bench.rows.append(
        Row(
            "decode, raw llama-cpp-python",
            "in-process",
            raw,
            unit="tok/s",
            source="client",
            note=f"whiz/raw = {share}" if share is not None else "",
        )
    )


def summarize(bench: ServeBench, quick: bool) -> dict[str, Any]:
    """The JSON line: every key present (None when skipped), then ratios measured in this run."""
    warm = bench.summary.get("warm_ttft_ms", {})
    labels = [size_label(s) for s in bench.plan.history_tokens]
    top = labels[-1]
    ws0 = warm.get("ws", {}).get("0")
    ratios = {
        f"warm{top}_over_warm0_ws": ratio(warm.get("ws", {}).get(top), ws0),
        f"warm{top}_over_warm0_http": ratio(warm.get("http", {}).get(top), warm.get("http", {}).get("0")),
        f"http_over_ws_warm{top}": ratio(warm.get("http", {}).get(top), warm.get("ws", {}).get(top)),
        "interleaved_over_warm0": ratio(bench.summary.get("interleaved_ttft_ms"), ws0),
        "shared_prefix_second_over_first": ratio(
            (bench.summary.get("shared_prefix_ttft_ms") or {}).get("second"),
            (bench.summary.get("shared_prefix_ttft_ms") or {}).get("first"),
        ),
    }
    return rounded(
        {
            "bench": "serve",
            "target": bench.target,
            "model": bench.model,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "quick": quick,
            "websocket": bench.ws_ok,
            "cold_ttft_ms": None,
            "warm_ttft_ms": {"ws": {}, "http": {}},
            "interleaved_ttft_ms": None,
            "shared_prefix_ttft_ms": {"first": None, "second": None},
            "decode_tokens_per_s": None,
            "roundtrip_ms": {"ws": None, "http": None},
            "prefix": None,
            "exec_first_token_ms": None,
            **bench.summary,
            "ratios": ratios,
            "notes": bench.notes,
        }
    )


async def run_serve_bench_async(
    target: str,
    model: str | None = None,
    *,
    api_key: str | None = None,
    quick: bool = False,
    raw_baseline: str | None = None,
    first_turn: FirstTurnPlan | None = None,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], list[Row]]:
    """Run every measurement; returns the JSON summary and the table rows. `first_turn` (default:
    the plan for `quick`) adds a long prefix cold, from memory and from disk, and `whiz exec` from a
    fresh process, with the model the target serves, loaded here."""
    bench = ServeBench(target, model, api_key, Plan.make(quick), progress or (lambda _: None))
    try:
        await bench.setup()
        steps = [
            bench.measure_cold,
            bench.measure_warm,
            bench.measure_interleaved,
            bench.measure_shared_prefix,
            bench.measure_decode,
            bench.measure_roundtrip,
        ]
        for step in steps:
            try:
                await step()
            except ConnectError:
                raise  # the server went away: nothing later can work either
            except ClientError as exc:
                bench.notes.append(f"{step.__name__} failed: {exc}")
        if raw_baseline:
            add_raw_baseline(bench, raw_baseline)
        await add_first_turn(bench, first_turn or FirstTurnPlan.make(quick))
        return summarize(bench, quick), bench.rows
    finally:
        await bench.close()


def run_serve_bench(target: str, model: str | None = None, **options: Any) -> dict[str, Any]:
    """The library entry point: run the bench and return the summary that the JSON line holds."""
    summary, _ = asyncio.run(run_serve_bench_async(target, model, **options))
    return summary


def main(
    target: str,
    model: str | None,
    api_key: str | None,
    quick: bool,
    raw_baseline: str | None = None,
    first_turn: FirstTurnPlan | None = None,
) -> int:
    """`whiz bench serve`: print the table and the JSON line; 0 on success, 1 if the server failed us."""

    def progress(message: str) -> None:
        print(f"… {message}", file=sys.stderr, flush=True)

    try:
        summary, rows = asyncio.run(
            run_serve_bench_async(
                target,
                model,
                api_key=api_key,
                quick=quick,
                raw_baseline=raw_baseline,
                first_turn=first_turn,
                progress=progress,
            )
        )
    except ClientError as exc:
        print(f"whiz bench serve: {exc}", file=sys.stderr)
        return 1
    print_report(rows, summary)
    return 0


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="http://127.0.0.1:8321")
    parser.add_argument("--model")
    parser.add_argument("--api-key", default=os.environ.get("WHIZ_API_KEY"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--raw-baseline", metavar="GGUF")
    parser.add_argument("--prefix-tokens", type=int)
    parser.add_argument("--no-exec", action="store_true")
    args = parser.parse_args()
    plan = FirstTurnPlan.make(args.quick, args.prefix_tokens, not args.no_exec)
    sys.exit(main(args.target, args.model, args.api_key, args.quick, args.raw_baseline, plan))
