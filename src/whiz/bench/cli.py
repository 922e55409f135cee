"""`whiz bench ...`: each benchmark's command, thin over its module here (each imports its module
only when run, so `whiz --help` stays quick). Their options are settings, declared once in
`whiz.bench.options` and made into flags by `settings_command`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from whiz.commands.settings_options import settings_command

if TYPE_CHECKING:
    from whiz.bench.options import (
        AgentBench,
        CodexRestartBench,
        CompleteBench,
        EditsBench,
        EngineBench,
        GatewayBench,
        HealBench,
        ParallelBench,
        PrefixCacheBench,
        ServeBench,
        SoakBench,
        StallBench,
        TasksBench,
    )

bench_app = typer.Typer(help="Benchmarks: each prints a table, then one JSON line.", no_args_is_help=True)

OPTIONS = "whiz.bench.options:"
DEEP = {"deep_base_url", "deep_model", "deep_api_key"}
"""The deep model's options, handed on as one `DeepSettings`."""


@settings_command(bench_app, OPTIONS + "ServeBench", name="serve")
def bench_serve(*, options: ServeBench) -> None:
    """Serving latency: cold and warm TTFT, interleaved sessions, shared prefixes, decode speed, and
    the first turn where the server is new (a prefix from disk, `whiz exec` from a fresh shell)."""
    from whiz.bench.serve import main

    given = options.model_dump(exclude={"prefix_tokens", "exec_"})
    raise typer.Exit(main(**given, first_turn=options.first_turn()))


@settings_command(bench_app, OPTIONS + "PrefixCacheBench", name="prefix-cache")
def bench_prefix_cache(*, options: PrefixCacheBench) -> None:
    """TTFT over a long shared prefix: cold, from memory, and from the disk cache after a restart."""
    from whiz.bench.prefix_cache import main

    o = options
    raise typer.Exit(main(o.model, o.prefix_tokens, o.prefix_cache_dir, threads=o.threads))


@settings_command(bench_app, OPTIONS + "CompleteBench", name="complete")
def bench_complete(*, options: CompleteBench) -> None:
    """Completion as you type: real code typed again, a completion asked at every pause."""
    from whiz.bench.complete import main

    raise typer.Exit(main(options.plan()))


@settings_command(bench_app, OPTIONS + "EngineBench", name="engine")
def bench_engine(*, options: EngineBench) -> None:
    """Plain decode and prefill of whiz's engine beside llama.cpp's own, same file and threads."""
    from whiz.bench.engine import DEEP_MODEL, FAST_MODEL, EnginePlan, main

    models = (FAST_MODEL, DEEP_MODEL) if options.deep else (FAST_MODEL,)
    plan = EnginePlan(models, threads=options.threads, quick=options.quick, speculation=options.speculation)
    raise typer.Exit(main(plan))


@settings_command(bench_app, OPTIONS + "StallBench", name="stall")
def bench_stall(*, options: StallBench) -> None:
    """The longest gap between a plain stream's tokens beside each worst-case request."""
    from whiz.bench.stall import StallPlan, main

    raise typer.Exit(main(StallPlan(model=options.model, plain_tokens=options.tokens)))


@settings_command(bench_app, OPTIONS + "CodexRestartBench", name="codex-restart")
def bench_codex_restart(*, options: CodexRestartBench) -> None:
    """The Codex CLI's first turn after a server restart, over a prompt it sent before."""
    from whiz.bench.codex_restart import CodexRestartPlan, main

    raise typer.Exit(main(CodexRestartPlan(options.model, options.codex, options.prefix_cache_dir)))


@settings_command(bench_app, OPTIONS + "SoakBench", name="soak")
def bench_soak(*, options: SoakBench) -> None:
    """Load and faults on a loopback server: clients vanishing mid-prefill/decode, hostile input
    mixed in; with --gateway, one replica killed behind a gateway; with --attack, hostile clients."""
    from whiz.bench.soak import main

    raise typer.Exit(main(options.plan()))


@settings_command(bench_app, OPTIONS + "EditsBench", name="edits")
def bench_edits(*, options: EditsBench) -> None:
    """Speculative edits: plain vs prompt lookup vs Predicted Outputs, speed and identical output."""
    from whiz.bench.edits import main

    raise typer.Exit(main(**options.model_dump()))


@settings_command(bench_app, OPTIONS + "TasksBench", name="tasks")
def bench_tasks(*, options: TasksBench) -> None:
    """The agent headless on EditEval: pass rate, seconds per task, well-formed edits, tokens/s."""
    from whiz.bench.tasks import main

    raise typer.Exit(main(**options.model_dump()))


@settings_command(bench_app, OPTIONS + "HealBench", name="heal")
def bench_heal(*, options: HealBench) -> None:
    """Healing on EditEval or seeded bugs: one fast attempt vs heal@N vs deep, over seeds, and
    parallel vs sequential decoding."""
    from whiz.bench.heal import main

    raise typer.Exit(main(**options.model_dump(exclude=DEEP), deep=options.deep()))


@settings_command(bench_app, OPTIONS + "AgentBench", name="agent")
def bench_agent(*, options: AgentBench) -> None:
    """Tasks done per minute: the agent headless over EditEval, CanItEdit and 5 small programs, for
    fast, deep, heal@5 and auto, over seeds: passes and passes per minute (mean and range), pass
    rate, median and p90 s/task, turns with no edit, runaways, tokens/task."""
    from whiz.bench.agent import main

    raise typer.Exit(main(**options.model_dump(exclude=DEEP), deep=options.deep()))


@settings_command(bench_app, OPTIONS + "ParallelBench", name="parallel")
def bench_parallel(*, options: ParallelBench) -> None:
    """Best-of-N decoding: N candidates in one request (decoded together) vs N requests in a row."""
    from whiz.bench.parallel import main

    raise typer.Exit(main(options.plan()))


@settings_command(bench_app, OPTIONS + "GatewayBench", name="gateway")
def bench_gateway(*, options: GatewayBench) -> None:
    """Session affinity vs round-robin over 2 local replicas, then a replica killed mid-run."""
    from whiz.bench.gateway import main

    raise typer.Exit(main(options.plan()))
