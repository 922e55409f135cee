"""`whiz bench ...`: each benchmark's command, thin over its module here (each imports its module
only when run, so `whiz --help` stays quick)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from whiz.commands.flags import ApiKeyOpt, DeepKeyOpt, DeepModelOpt, DeepUrlOpt, ModelOpt, fail

bench_app = typer.Typer(help="Benchmarks: each prints a table, then one JSON line.", no_args_is_help=True)

# `whiz serve`'s address on its defaults (config.ServeSettings' host and port).
DEFAULT_TARGET = "http://127.0.0.1:8321"
TargetOpt = Annotated[str, typer.Option(help="Base URL of the server to measure.")]


@bench_app.command("serve")
def bench_serve(
    target: TargetOpt = DEFAULT_TARGET,
    model: Annotated[
        str | None, typer.Option(help="Model id to request (default: the server's first).")
    ] = None,
    api_key: Annotated[str | None, typer.Option(help="Bearer key for the target.")] = None,
    quick: Annotated[bool, typer.Option(help="Small sizes, for a smoke test.")] = False,
    raw_baseline: Annotated[
        Path | None, typer.Option(help="GGUF file: also time raw llama-cpp-python decoding, for the ratio.")
    ] = None,
    prefix_tokens: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Prefix timed cold, from memory and from disk after a restart, in an engine this command "
            "loads (default 6000, 1500 with --quick; 0 skips; at least 1024, the shortest prefix saved).",
        ),
    ] = None,
    exec_: Annotated[
        bool,
        typer.Option(
            "--exec/--no-exec",
            help="Time `whiz exec` from a fresh process, with and without the background server.",
        ),
    ] = True,
) -> None:
    """Serving latency: cold and warm TTFT, interleaved sessions, shared prefixes, decode speed, and
    the first turn where the server is new (a prefix from disk, `whiz exec` from a fresh shell)."""
    from whiz.bench.first_turn import FirstTurnPlan
    from whiz.bench.serve import main

    if prefix_tokens is not None and 0 < prefix_tokens < 1024:
        raise fail("--prefix-tokens: 0, or at least 1024 (shorter prefixes are not saved to disk)")
    plan = FirstTurnPlan.make(quick, prefix_tokens, exec_)
    raise typer.Exit(
        main(
            target=target,
            model=model,
            api_key=api_key,
            quick=quick,
            raw_baseline=raw_baseline,
            first_turn=plan,
        )
    )


@bench_app.command("prefix-cache")
def bench_prefix_cache(
    model: Annotated[str, typer.Option(help="Model to load.")] = "qwen2.5-coder-0.5b",
    prefix_tokens: Annotated[int, typer.Option(min=1024, help="Length of the shared prefix.")] = 6000,
    prefix_cache_dir: Annotated[
        Path | None, typer.Option(help="Cache folder (default: a temporary one, removed after).")
    ] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads (default: all cores).")] = None,
) -> None:
    """TTFT over a long shared prefix: cold, from memory, and from the disk cache after a restart."""
    from whiz.bench.prefix_cache import main

    raise typer.Exit(main(model, prefix_tokens, prefix_cache_dir, threads=threads))


@bench_app.command("complete")
def bench_complete(
    model: Annotated[str, typer.Option(help="Model for `whiz serve`.")] = "qwen2.5-coder-0.5b",
    quick: Annotated[bool, typer.Option(help="Two functions, 20 requests each (a few minutes).")] = False,
    llama_server: Annotated[
        Path | None, typer.Option(help="A llama-server binary to compare with (same model file).")
    ] = None,
    threads: Annotated[int | None, typer.Option(help="CPU threads (default: all cores).")] = None,
    requests: Annotated[
        int | None,
        typer.Option(
            min=1, help="Completions asked per function, at its first pauses (default: 80; --quick: 20)."
        ),
    ] = None,
) -> None:
    """Completion as you type: real code typed again, a completion asked at every pause."""
    from whiz.bench.complete import CompletePlan, main

    raise typer.Exit(main(CompletePlan(model, quick, llama_server, threads=threads, requests=requests)))


@bench_app.command("engine")
def bench_engine(
    deep: Annotated[bool, typer.Option(help="Also the deep model (qwen2.5-coder-1.5b), if pulled.")] = False,
    threads: Annotated[int | None, typer.Option(help="CPU threads, both sides (default: all cores).")] = None,
    quick: Annotated[bool, typer.Option(help="Fewer, shorter runs (a 1k-token long context).")] = False,
    speculation: Annotated[bool, typer.Option(help="Also decode with drafts, beside both.")] = True,
) -> None:
    """Plain decode and prefill of whiz's engine beside llama.cpp's own, same file and threads."""
    from whiz.bench.engine import DEEP_MODEL, FAST_MODEL, EnginePlan, main

    models = (FAST_MODEL, DEEP_MODEL) if deep else (FAST_MODEL,)
    raise typer.Exit(main(EnginePlan(models, threads=threads, quick=quick, speculation=speculation)))


@bench_app.command("stall")
def bench_stall(
    model: Annotated[str, typer.Option(help="Model the engine loads.")] = "qwen2.5-coder-0.5b",
    tokens: Annotated[int, typer.Option(help="Tokens of the plain stream.")] = 64,
) -> None:
    """The longest gap between a plain stream's tokens beside each worst-case request."""
    from whiz.bench.stall import StallPlan, main

    raise typer.Exit(main(StallPlan(model=model, plain_tokens=tokens)))


@bench_app.command("codex-restart")
def bench_codex_restart(
    model: Annotated[str, typer.Option(help="Model for `whiz serve`.")] = "qwen2.5-coder-0.5b",
    codex: Annotated[
        Path | None, typer.Option(help="The Codex CLI (default: the one in the whiz cache, or `codex`).")
    ] = None,
    prefix_cache_dir: Annotated[
        Path | None, typer.Option(help="The server's cache folder (default: a temporary one, removed after).")
    ] = None,
) -> None:
    """The Codex CLI's first turn after a server restart, over a prompt it sent before."""
    from whiz.bench.codex_restart import CodexRestartPlan, main

    raise typer.Exit(main(CodexRestartPlan(model, codex, prefix_cache_dir)))


@bench_app.command("soak")
def bench_soak(
    target: Annotated[str, typer.Option(help="Base URL of a server on this machine.")] = DEFAULT_TARGET,
    seconds: Annotated[float, typer.Option(help="How long to run.")] = 30.0,
    ws_sessions: Annotated[int, typer.Option(help="Concurrent WebSocket clients.")] = 4,
    http_clients: Annotated[int, typer.Option(help="Concurrent HTTP clients.")] = 4,
    max_tokens: Annotated[int, typer.Option(help="Output tokens of a well-behaved turn.")] = 48,
    model: Annotated[str | None, typer.Option(help="Model id to request.")] = None,
    api_key: Annotated[str | None, typer.Option(help="Bearer key for the target.")] = None,
    patience_s: Annotated[
        float, typer.Option(help="A served turn whose first token comes later is counted as slow.")
    ] = 60.0,
    hang_s: Annotated[float, typer.Option(help="A turn with no end after this long is lost (hung).")] = 300.0,
    gateway: Annotated[
        bool,
        typer.Option(
            help="Instead of --target: start 2 replicas (whiz serve --engine-only) and a gateway on "
            "loopback, soak through the gateway, and kill one replica partway."
        ),
    ] = False,
    replica_model: Annotated[str, typer.Option(help="The replicas' --model (with --gateway).")] = (
        "qwen2.5-coder-0.5b"
    ),
    replica_slots: Annotated[int, typer.Option(help="The replicas' --slots (with --gateway).")] = 5,
    kill_after_s: Annotated[
        float | None, typer.Option(help="When to kill a replica (with --gateway; default 40% of the run).")
    ] = None,
    attack: Annotated[
        list[str] | None,
        typer.Option(
            "--attack",
            help="Run a hostile client beside the honest ones (repeatable): slowloris, ping_flood, "
            "grammar_bomb, ambiguous_grammar, giant_prediction, cross_key (with --gateway: a second "
            "key probes the first one's cached prompt).",
        ),
    ] = None,
    cpus: Annotated[
        str | None,
        typer.Option(
            help="Pin the bench, its clients and attackers, to these CPUs (as taskset -c: 1, 0,2, 2-3); "
            "run the server on others so their work is not counted as its stalls."
        ),
    ] = None,
    server_cpus: Annotated[
        str | None,
        typer.Option(help="With --gateway: pin the replicas and the gateway to these CPUs."),
    ] = None,
    attackers_idle: Annotated[
        bool,
        typer.Option(
            help="Run the attackers at idle priority, on the CPU the honest clients leave (as attackers "
            "elsewhere take none of theirs); --no-attackers-idle where no CPU is idle, or they barely run."
        ),
    ] = True,
) -> None:
    """Load and faults on a loopback server: clients vanishing mid-prefill/decode, hostile input
    mixed in; with --gateway, one replica killed behind a gateway; with --attack, hostile clients."""
    from whiz.bench.soak import SoakPlan, main, parse_cpus

    pins: dict[str, tuple[int, ...]] = {}
    for name, text in (("cpus", cpus), ("server_cpus", server_cpus)):
        try:
            pins[name] = parse_cpus(text) if text is not None else ()
        except ValueError:
            flag = "--" + name.replace("_", "-")
            raise typer.BadParameter(
                f"{text!r} is not a CPU list like 1, 0,2 or 2-3", param_hint=flag
            ) from None
    plan = SoakPlan(
        target, seconds, ws_sessions, http_clients, max_tokens, api_key=api_key, model=model,
        patience_s=patience_s, hang_s=hang_s, gateway=gateway, replica_model=replica_model,
        replica_slots=replica_slots, kill_after_s=kill_after_s, attacks=tuple(attack or ()),
        attackers_idle=attackers_idle, **pins,
    )  # fmt: skip
    raise typer.Exit(main(plan))


@bench_app.command("edits")
def bench_edits(
    target: TargetOpt = DEFAULT_TARGET,
    suite: Annotated[
        str, typer.Option(help="rename (stdlib windows), editeval, freeform (new text: drafts miss), or all.")
    ] = "all",
    limit: Annotated[int | None, typer.Option(help="Run only the first N tasks of each suite.")] = None,
    model: Annotated[str | None, typer.Option(help="Model id to request.")] = None,
    api_key: Annotated[str | None, typer.Option(help="Bearer key for the target.")] = None,
    data: Annotated[
        Path | None, typer.Option(help="EditEval JSONL (default: shared/bench/editeval.jsonl).")
    ] = None,
) -> None:
    """Speculative edits: plain vs prompt lookup vs Predicted Outputs, speed and identical output."""
    from whiz.bench.edits import main

    raise typer.Exit(main(target=target, suite=suite, limit=limit, model=model, api_key=api_key, data=data))


@bench_app.command("tasks")
def bench_tasks(
    target: Annotated[
        str | None,
        typer.Option(help="Base URL of the server (default: :8321, or one started in-process if none runs)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Run only the first N tasks.")] = 5,
    actions: Annotated[str, typer.Option("--actions", help="text, tools, or both (compared).")] = "text",
    api_key: ApiKeyOpt = None,
    model: ModelOpt = None,
    data: Annotated[
        Path | None, typer.Option(help="EditEval JSONL (default: shared/bench/editeval.jsonl).")
    ] = None,
) -> None:
    """The agent headless on EditEval: pass rate, seconds per task, well-formed edits, tokens/s."""
    from whiz.bench.tasks import main

    raise typer.Exit(
        main(target=target, limit=limit, actions=actions, api_key=api_key, model=model, data=data)
    )


@bench_app.command("heal")
def bench_heal(
    target: Annotated[
        str | None,
        typer.Option(help="Base URL of the fast model's server (default: :8321, or one started in-process)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Run only the first N tasks.")] = 3,
    n: Annotated[int, typer.Option("-n", help="Candidates for heal@N and the decoding comparison.")] = 5,
    temperature: Annotated[float, typer.Option(help="Sampling temperature of heal@N.")] = 0.7,
    variants: Annotated[
        str,
        typer.Option(
            help="Comma-separated: fast (one attempt), heal (`whiz heal`: localize, then repair), "
            "heal-plain (without localizing), heal-all (every candidate finishes), deep, decode "
            "(parallel vs sequential)."
        ),
    ] = "fast,heal,deep,decode",
    seeds: Annotated[
        int,
        typer.Option(help="Runs of every variant on every task, seeded apart: rate per seed, mean, spread."),
    ] = 1,
    suite: Annotated[
        str,
        typer.Option(help="editeval (EditEval's tasks) or seeded (small repositories with a seeded bug)."),
    ] = "editeval",
    first_seed: Annotated[
        int, typer.Option(help="The first run's seed; run k uses this + 100 k (to split a long run).")
    ] = 1234,
    api_key: ApiKeyOpt = None,
    model: ModelOpt = None,
    deep_base_url: DeepUrlOpt = None,
    deep_model: DeepModelOpt = None,
    deep_api_key: DeepKeyOpt = None,
    data: Annotated[
        Path | None, typer.Option(help="EditEval JSONL (default: shared/bench/editeval.jsonl).")
    ] = None,
) -> None:
    """Healing on EditEval or seeded bugs: one fast attempt vs heal@N vs deep, over seeds, and
    parallel vs sequential decoding."""
    from whiz.bench.heal import main
    from whiz.modes.endpoints import DeepSettings

    deep = DeepSettings(base_url=deep_base_url, model=deep_model, api_key=deep_api_key)
    raise typer.Exit(
        main(target=target, limit=limit, n=n, temperature=temperature, variants=variants, api_key=api_key,
             model=model, deep=deep, data=data, seeds=seeds, suite=suite, first_seed=first_seed)
    )  # fmt: skip


@bench_app.command("agent")
def bench_agent(
    target: Annotated[
        str | None,
        typer.Option(help="Base URL of the fast model's server (default: :8321, or one started in-process)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(help="EditEval and CanItEdit tasks: only the first N of each.")
    ] = 10,
    variants: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated: fast, deep, heal (heal@5), auto, exec (auto as plain `whiz exec` "
            "runs it). Default: fast,heal,auto; with --tasks, exec."
        ),
    ] = None,
    suites: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated: editeval, canitedit (made by scripts/canitedit.py), programs. "
            "Default: editeval,programs; with --tasks, none."
        ),
    ] = None,
    seeds: Annotated[
        int,
        typer.Option(
            min=1,
            help="Run every variant this many times, seeding its sampled candidates apart; the "
            "report gives the mean and range of passes and of passes per minute.",
        ),
    ] = 3,
    api_key: ApiKeyOpt = None,
    model: ModelOpt = None,
    deep_base_url: DeepUrlOpt = None,
    deep_model: DeepModelOpt = None,
    deep_api_key: DeepKeyOpt = None,
    data: Annotated[
        Path | None, typer.Option(help="EditEval JSONL (default: shared/bench/editeval.jsonl).")
    ] = None,
    canitedit: Annotated[
        Path | None,
        typer.Option(
            help="CanItEdit JSONL (default: shared/bench/canitedit.jsonl, as scripts/canitedit.py writes it)."
        ),
    ] = None,
    keep: Annotated[
        Path | None,
        typer.Option(help="Copy each task's final workspace and session home here (DIR/seedN/variant/task)."),
    ] = None,
    first_seed: Annotated[
        int,
        typer.Option(
            help="Seed i seeds the sampled candidates with this + 7919 i; give 1234 + 7919 k to go on "
            "from a run of k seeds."
        ),
    ] = 1234,
    tasks: Annotated[
        Path | None,
        typer.Option(
            help="A folder of tasks, DIR/ID/task.json (or .toml) with files/ and judge/ "
            "(docs/bench-agent.md), run as `whiz exec` runs them."
        ),
    ] = None,
    with_tests: Annotated[
        bool,
        typer.Option(
            "--with-tests",
            help="With --tasks: also run every variant with the task's test command (--test-cmd).",
        ),
    ] = False,
) -> None:
    """Tasks done per minute: the agent headless over EditEval, CanItEdit and 5 small programs, for
    fast, deep, heal@5 and auto, over seeds: passes and passes per minute (mean and range), pass
    rate, median and p90 s/task, turns with no edit, runaways, tokens/task."""
    from whiz.bench.agent import main
    from whiz.modes.endpoints import DeepSettings

    deep = DeepSettings(base_url=deep_base_url, model=deep_model, api_key=deep_api_key)
    raise typer.Exit(
        main(target=target, limit=limit, variants=variants, suites=suites, api_key=api_key, model=model,
             deep=deep, data=data, keep=keep, seeds=seeds, canitedit=canitedit, first_seed=first_seed,
             tasks=tasks, with_tests=with_tests)
    )  # fmt: skip


@bench_app.command("parallel")
def bench_parallel(
    target: TargetOpt = DEFAULT_TARGET,
    n: Annotated[int, typer.Option("--n", help="Candidates per prompt.")] = 5,
    max_tokens: Annotated[int, typer.Option(help="Most tokens per candidate.")] = 128,
    rounds: Annotated[int, typer.Option(help="Times each prompt runs in each mode.")] = 2,
    temperature: Annotated[
        float, typer.Option(help="Sampling temperature (seeds make it repeatable).")
    ] = 0.7,
    model: Annotated[str | None, typer.Option(help="Model id to request.")] = None,
    api_key: Annotated[str | None, typer.Option(help="Bearer key for the target.")] = None,
) -> None:
    """Best-of-N decoding: N candidates in one request (decoded together) vs N requests in a row."""
    from whiz.bench.parallel import ParallelPlan, main

    plan = ParallelPlan(
        target, model, api_key, n=n, max_tokens=max_tokens, rounds=rounds, temperature=temperature
    )
    raise typer.Exit(main(plan))


@bench_app.command("gateway")
def bench_gateway(
    sessions: Annotated[int, typer.Option(min=1, help="Interleaved WebSocket sessions.")] = 8,
    history_tokens: Annotated[int, typer.Option(min=0, help="History each session starts with.")] = 2000,
    rounds: Annotated[int, typer.Option(min=1, help="Measured turns per session and policy.")] = 2,
    reply_tokens: Annotated[int, typer.Option(min=1, help="Tokens each turn generates.")] = 8,
    model: Annotated[str, typer.Option(help="Model the two replicas load.")] = "qwen2.5-coder-0.5b",
    replica_threads: Annotated[
        int | None, typer.Option(help="llama.cpp threads per replica (default: half the cores).")
    ] = None,
    kill: Annotated[
        bool, typer.Option(help="Kill a replica mid-turn at the end and count lost turns.")
    ] = True,
) -> None:
    """Session affinity vs round-robin over 2 local replicas, then a replica killed mid-run."""
    from whiz.bench.gateway import GatewayPlan, main

    plan = GatewayPlan(
        sessions=sessions,
        history_tokens=history_tokens,
        rounds=rounds,
        reply_tokens=reply_tokens,
        model=model,
        replica_threads=replica_threads,
        kill=kill,
    )
    raise typer.Exit(main(plan))
