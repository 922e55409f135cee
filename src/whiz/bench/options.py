"""The bench commands' options, declared once: each field is a flag of its command (`whiz bench
NAME`), with its description for help, its default for default and its `Flag` for the spelling,
the environment variable and what help says of a default decided later
(`settings_options.settings_command` makes the flags). Bad input is refused here with the flag's
name, and each command gets a checked object that makes its bench's plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from whiz.bench.complete import QUICK_REQUESTS, REQUESTS_PER_FUNCTION
from whiz.bench.first_turn import PREFIX_TOKENS, QUICK_PREFIX_TOKENS
from whiz.commands.agent_options import DeepOptions
from whiz.flag import Flag
from whiz.modes.endpoints import DEEP_LOCAL_MODEL, DEFAULT_BASE_URL, DEFAULT_MODEL

if TYPE_CHECKING:
    from whiz.bench.complete import CompletePlan
    from whiz.bench.first_turn import FirstTurnPlan
    from whiz.bench.gateway import GatewayPlan
    from whiz.bench.parallel import ParallelPlan
    from whiz.bench.soak import SoakPlan

OWN = ConfigDict(title="", defer_build=True)
"""A command's own options: listed first, under no heading."""

SHORTEST_SAVED_PREFIX = 1024
"""The shortest prefix the server saves to disk: a shorter one cannot be timed from there."""

Quick = Annotated[bool, Flag("--quick/--no-quick")]
Threads = Annotated[int | None, Flag(shown="all cores")]
TemporaryDir = Annotated[Path | None, Flag(shown="a temporary one, removed after")]
EditEvalFile = Annotated[Path | None, Flag(shown="shared/bench/editeval.jsonl")]
AgentTarget = Annotated[str | None, Flag(shown=":8321, or one started in-process if none runs")]
AgentKey = Annotated[str | None, Flag(env="WHIZ_API_KEY")]
AGENT_MODEL_HELP = "Model to request (or to load, when whiz starts its own server)."
EDITEVAL_HELP = "EditEval JSONL."


class ServeBench(BaseModel):
    """`whiz bench serve`."""

    model_config = OWN

    target: str = Field(DEFAULT_BASE_URL, description="Base URL of the server to measure.")
    model: Annotated[str | None, Flag(shown="the server's first")] = Field(
        None, description="Model id to request."
    )
    api_key: str | None = Field(None, description="Bearer key for the target.")
    quick: Quick = Field(False, description="Small sizes, for a smoke test.")
    raw_baseline: Path | None = Field(
        None, description="GGUF file: also time raw llama-cpp-python decoding, for the ratio."
    )
    prefix_tokens: Annotated[
        int | None, Field(ge=0), Flag(shown=f"{PREFIX_TOKENS}, {QUICK_PREFIX_TOKENS} with --quick")
    ] = Field(
        None,
        description="Prefix timed cold, from memory and from disk after a restart, in an engine this command "
        f"loads (0 skips; at least {SHORTEST_SAVED_PREFIX}, the shortest prefix saved).",
    )
    exec_: Annotated[bool, Flag("--exec/--no-exec")] = Field(
        True, description="Time `whiz exec` from a fresh process, with and without the background server."
    )

    @field_validator("prefix_tokens")
    @classmethod
    def _saved_to_disk(cls, value: int | None) -> int | None:
        if value is not None and 0 < value < SHORTEST_SAVED_PREFIX:
            raise ValueError(
                f"0, or at least {SHORTEST_SAVED_PREFIX} (shorter prefixes are not saved to disk)"
            )
        return value

    def first_turn(self) -> FirstTurnPlan:
        from whiz.bench.first_turn import FirstTurnPlan

        return FirstTurnPlan.make(self.quick, self.prefix_tokens, self.exec_)


class PrefixCacheBench(BaseModel):
    """`whiz bench prefix-cache`."""

    model_config = OWN

    model: str = Field(DEFAULT_MODEL, description="Model to load.")
    prefix_tokens: Annotated[int, Field(ge=SHORTEST_SAVED_PREFIX)] = Field(
        PREFIX_TOKENS, description="Length of the shared prefix."
    )
    prefix_cache_dir: TemporaryDir = Field(None, description="Cache folder.")
    threads: Threads = Field(None, description="CPU threads.")


class CompleteBench(BaseModel):
    """`whiz bench complete`."""

    model_config = OWN

    model: str = Field(DEFAULT_MODEL, description="Model for `whiz serve`.")
    quick: Quick = Field(False, description=f"Two functions, {QUICK_REQUESTS} requests each (a few minutes).")
    llama_server: Path | None = Field(
        None, description="A llama-server binary to compare with (same model file)."
    )
    threads: Threads = Field(None, description="CPU threads.")
    requests: Annotated[
        int | None, Field(ge=1), Flag(shown=f"{REQUESTS_PER_FUNCTION}, {QUICK_REQUESTS} with --quick")
    ] = Field(None, description="Completions asked per function, at its first pauses.")

    def plan(self) -> CompletePlan:
        from whiz.bench.complete import CompletePlan

        return CompletePlan(
            self.model, self.quick, self.llama_server, threads=self.threads, requests=self.requests
        )


class EngineBench(BaseModel):
    """`whiz bench engine`."""

    model_config = OWN

    deep: Annotated[bool, Flag("--deep/--no-deep")] = Field(
        False, description=f"Also the deep model ({DEEP_LOCAL_MODEL}), if pulled."
    )
    threads: Threads = Field(None, description="CPU threads, both sides.")
    quick: Quick = Field(False, description="Fewer, shorter runs (a 1k-token long context).")
    speculation: bool = Field(True, description="Also decode with drafts, beside both.")


class StallBench(BaseModel):
    """`whiz bench stall`."""

    model_config = OWN

    model: str = Field(DEFAULT_MODEL, description="Model the engine loads.")
    tokens: int = Field(64, description="Tokens of the plain stream.")


class CodexRestartBench(BaseModel):
    """`whiz bench codex-restart`."""

    model_config = OWN

    model: str = Field(DEFAULT_MODEL, description="Model for `whiz serve`.")
    codex: Annotated[Path | None, Flag(shown="the one in the whiz cache, or `codex`")] = Field(
        None, description="The Codex CLI."
    )
    prefix_cache_dir: TemporaryDir = Field(None, description="The server's cache folder.")


class SoakBench(BaseModel):
    """`whiz bench soak`."""

    model_config = OWN

    target: str = Field(DEFAULT_BASE_URL, description="Base URL of a server on this machine.")
    seconds: float = Field(30.0, description="How long to run.")
    ws_sessions: int = Field(4, description="Concurrent WebSocket clients.")
    http_clients: int = Field(4, description="Concurrent HTTP clients.")
    max_tokens: int = Field(48, description="Output tokens of a well-behaved turn.")
    model: str | None = Field(None, description="Model id to request.")
    api_key: str | None = Field(None, description="Bearer key for the target.")
    patience_s: float = Field(
        60.0, description="A served turn whose first token comes later is counted as slow."
    )
    hang_s: float = Field(300.0, description="A turn with no end after this long is lost (hung).")
    gateway: Annotated[bool, Flag("--gateway/--no-gateway")] = Field(
        False,
        description="Instead of --target: start 2 replicas (whiz serve --engine-only) and a gateway on "
        "loopback, soak through the gateway, and kill one replica partway.",
    )
    replica_model: str = Field(DEFAULT_MODEL, description="The replicas' --model (with --gateway).")
    replica_slots: int = Field(5, description="The replicas' --slots (with --gateway).")
    kill_after_s: Annotated[float | None, Flag(shown="40% of the run")] = Field(
        None, description="When to kill a replica (with --gateway)."
    )
    attack: Annotated[list[str], Flag("--attack")] = Field(
        default_factory=list,
        description="Run a hostile client beside the honest ones: slowloris, ping_flood, grammar_bomb, "
        "ambiguous_grammar, giant_prediction, cross_key (with --gateway: a second key probes the first "
        "one's cached prompt).",
    )
    cpus: str | None = Field(
        None,
        description="Pin the bench, its clients and attackers, to these CPUs (as taskset -c: 1, 0,2, 2-3); "
        "run the server on others so their work is not counted as its stalls.",
    )
    server_cpus: str | None = Field(
        None, description="With --gateway: pin the replicas and the gateway to these CPUs."
    )
    attackers_idle: bool = Field(
        True,
        description="Run the attackers at idle priority, on the CPU the honest clients leave (as attackers "
        "elsewhere take none of theirs); --no-attackers-idle where no CPU is idle, or they barely run.",
    )

    @field_validator("cpus", "server_cpus")
    @classmethod
    def _cpu_list(cls, value: str | None) -> str | None:
        from whiz.bench.soak import parse_cpus

        if value is not None:
            try:
                parse_cpus(value)
            except ValueError:
                raise ValueError("must be a CPU list like 1, 0,2 or 2-3") from None
        return value

    def plan(self) -> SoakPlan:
        from whiz.bench.soak import SoakPlan, parse_cpus

        given = {"cpus": self.cpus, "server_cpus": self.server_cpus}
        pins = {name: parse_cpus(text) if text is not None else () for name, text in given.items()}
        return SoakPlan(
            self.target, self.seconds, self.ws_sessions, self.http_clients, self.max_tokens,
            api_key=self.api_key, model=self.model, patience_s=self.patience_s, hang_s=self.hang_s,
            gateway=self.gateway, replica_model=self.replica_model, replica_slots=self.replica_slots,
            kill_after_s=self.kill_after_s, attacks=tuple(self.attack),
            attackers_idle=self.attackers_idle, **pins,
        )  # fmt: skip


class EditsBench(BaseModel):
    """`whiz bench edits`."""

    model_config = OWN

    target: str = Field(DEFAULT_BASE_URL, description="Base URL of the server to measure.")
    suite: str = Field(
        "all", description="rename (stdlib windows), editeval, freeform (new text: drafts miss), or all."
    )
    limit: int | None = Field(None, description="Run only the first N tasks of each suite.")
    model: str | None = Field(None, description="Model id to request.")
    api_key: str | None = Field(None, description="Bearer key for the target.")
    data: EditEvalFile = Field(None, description=EDITEVAL_HELP)


class TasksBench(BaseModel):
    """`whiz bench tasks`."""

    model_config = OWN

    target: AgentTarget = Field(None, description="Base URL of the server.")
    limit: int | None = Field(5, description="Run only the first N tasks.")
    actions: str = Field("text", description="text, tools, or both (compared).")
    api_key: AgentKey = Field(None, description="Bearer key for the server.")
    model: str | None = Field(None, description=AGENT_MODEL_HELP)
    data: EditEvalFile = Field(None, description=EDITEVAL_HELP)


class HealBench(DeepOptions):
    """`whiz bench heal`: its own options, and where the deep model answers."""

    model_config = OWN

    target: AgentTarget = Field(None, description="Base URL of the fast model's server.")
    limit: int | None = Field(3, description="Run only the first N tasks.")
    n: Annotated[int, Flag("-n")] = Field(5, description="Candidates for heal@N and the decoding comparison.")
    temperature: float = Field(0.7, description="Sampling temperature of heal@N.")
    variants: str = Field(
        "fast,heal,deep,decode",
        description="Comma-separated: fast (one attempt), heal (`whiz heal`: localize, then repair), "
        "heal-plain (without localizing), heal-all (every candidate finishes), deep, decode "
        "(parallel vs sequential).",
    )
    seeds: int = Field(
        1, description="Runs of every variant on every task, seeded apart: rate per seed, mean, spread."
    )
    suite: str = Field(
        "editeval",
        description="editeval (EditEval's tasks) or seeded (small repositories with a seeded bug).",
    )
    first_seed: int = Field(
        1234, description="The first run's seed; run k uses this + 100 k (to split a long run)."
    )
    api_key: AgentKey = Field(None, description="Bearer key for the server.")
    model: str | None = Field(None, description=AGENT_MODEL_HELP)
    data: EditEvalFile = Field(None, description=EDITEVAL_HELP)


class AgentBench(DeepOptions):
    """`whiz bench agent`: its own options, and where the deep model answers."""

    model_config = OWN

    target: AgentTarget = Field(None, description="Base URL of the fast model's server.")
    limit: int | None = Field(10, description="EditEval and CanItEdit tasks: only the first N of each.")
    variants: Annotated[str | None, Flag(shown="fast,heal,auto; exec with --tasks")] = Field(
        None,
        description="Comma-separated: fast, deep, heal (heal@5), auto, exec (auto as plain `whiz exec` "
        "runs it).",
    )
    suites: Annotated[str | None, Flag(shown="editeval,programs; none with --tasks")] = Field(
        None, description="Comma-separated: editeval, canitedit (made by scripts/canitedit.py), programs."
    )
    seeds: Annotated[int, Field(ge=1)] = Field(
        3,
        description="Run every variant this many times, seeding its sampled candidates apart; the report "
        "gives the mean and range of passes and of passes per minute.",
    )
    api_key: AgentKey = Field(None, description="Bearer key for the server.")
    model: str | None = Field(None, description=AGENT_MODEL_HELP)
    data: EditEvalFile = Field(None, description=EDITEVAL_HELP)
    canitedit: Annotated[Path | None, Flag(shown="shared/bench/canitedit.jsonl")] = Field(
        None, description="CanItEdit JSONL, as scripts/canitedit.py writes it."
    )
    keep: Path | None = Field(
        None, description="Copy each task's final workspace and session home here (DIR/seedN/variant/task)."
    )
    first_seed: int = Field(
        1234,
        description="Seed i seeds the sampled candidates with this + 7919 i; give 1234 + 7919 k to go on "
        "from a run of k seeds.",
    )
    tasks: Path | None = Field(
        None,
        description="A folder of tasks, DIR/ID/task.json (or .toml) with files/ and judge/ "
        "(docs/bench-agent.md), run as `whiz exec` runs them.",
    )
    with_tests: bool = Field(
        False, description="With --tasks: also run every variant with the task's test command (--test-cmd)."
    )


class ParallelBench(BaseModel):
    """`whiz bench parallel`."""

    model_config = OWN

    target: str = Field(DEFAULT_BASE_URL, description="Base URL of the server to measure.")
    n: int = Field(5, description="Candidates per prompt.")
    max_tokens: int = Field(128, description="Most tokens per candidate.")
    rounds: int = Field(2, description="Times each prompt runs in each mode.")
    temperature: float = Field(0.7, description="Sampling temperature (seeds make it repeatable).")
    model: str | None = Field(None, description="Model id to request.")
    api_key: str | None = Field(None, description="Bearer key for the target.")

    def plan(self) -> ParallelPlan:
        from whiz.bench.parallel import ParallelPlan

        return ParallelPlan(
            self.target, self.model, self.api_key, n=self.n, max_tokens=self.max_tokens,
            rounds=self.rounds, temperature=self.temperature,
        )  # fmt: skip


class GatewayBench(BaseModel):
    """`whiz bench gateway`."""

    model_config = OWN

    sessions: Annotated[int, Field(ge=1)] = Field(8, description="Interleaved WebSocket sessions.")
    history_tokens: Annotated[int, Field(ge=0)] = Field(2000, description="History each session starts with.")
    rounds: Annotated[int, Field(ge=1)] = Field(2, description="Measured turns per session and policy.")
    reply_tokens: Annotated[int, Field(ge=1)] = Field(8, description="Tokens each turn generates.")
    model: str = Field(DEFAULT_MODEL, description="Model the two replicas load.")
    replica_threads: Annotated[int | None, Flag(shown="half the cores")] = Field(
        None, description="llama.cpp threads per replica."
    )
    kill: bool = Field(True, description="Kill a replica mid-turn at the end and count lost turns.")

    def plan(self) -> GatewayPlan:
        from whiz.bench.gateway import GatewayPlan

        return GatewayPlan(**self.model_dump())
