"""The options of the commands that run the agent (`exec`, `resume`, `code`, `acp`, `heal`, `swarm`,
and `sandbox`'s confinement), declared once: each field is a flag of the commands whose settings
compose it, with its description for help, its default for default and its `Flag` for the
spelling and environment variable (`settings_options.settings_command` makes the flags).

The parts (models, the policy, the sandbox, how the agent acts) are composed per command; a
command that needs another default or another word for a flag (`--mode`, `--approval`) says so in
its own class. Bad input is refused here, with the flag's name (`settings_options.complaint`), and
the command gets a settings object it can trust. The settings the library takes (`FastSettings`,
`AgentConfig`, `SandboxOptions`, `HealSettings`, `SwarmSettings`) are made from these by their
methods, and their defaults are these fields' (`whiz heal` turns `localize` on, and `--mode`
differs by command). `SwarmOptions` writes `SwarmSettings`' defaults again, since the swarm's
modules are not worth importing for every agent command's start; `tests/test_cli_defaults.py`
keeps the two equal.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from whiz.agent.approvals import ApprovalMode
from whiz.agent.config import AgentConfig
from whiz.agent.formats import ActionFormat
from whiz.agent.runs_check import CHECK_TIMEOUT_S, with_check
from whiz.environments.sandbox import SandboxMode, SandboxOptions
from whiz.flag import Flag
from whiz.modes.endpoints import DEEP_LOCAL_MODEL, DEFAULT_BASE_URL, DeepSettings, FastSettings
from whiz.modes.healing import HealSettings
from whiz.modes.policy import parse_action
from whiz.modes.registry import Mode, mode_help
from whiz.modes.session import HEAL_N_DEFAULT, SessionOptions, check_heal

if TYPE_CHECKING:
    from whiz.config_file import ConfigFile
    from whiz.modes.swarm import SwarmSettings

MAX_WORKERS = 16


def between(low: float, high: float):
    """A bound on a number, said as a range ("-n must be between 1 and 16")."""

    def check(value: Any) -> Any:
        if value is not None and not low <= value <= high:
            raise ValueError(f"must be between {low:g} and {high:g}")
        return value

    return AfterValidator(check)


TRACE_HELP = (
    "Run the localized function once more on the arguments a failing check gave it, traced line by "
    "line: its one-token changes are tested on the lines that call ran first, and the rewrites after "
    "the first are shown what each line did (the values it set)."
)


def mode_field(default: str | None, resumed: bool = False) -> Any:
    """`--mode`, defaulting to `default`; None: the resumed session's mode, else fast."""
    extra = " A resumed session keeps its mode unless --mode is given." if resumed else ""
    return Field(default, description=mode_help() + extra)


ModeName = Annotated[str | None, Flag(shown="fast, or the resumed session's")]
"""A mode's name; its flag shows what None means."""


def approval_field(asks: str) -> Any:
    """`--approval`, whose auto-edit does with a command what `asks` says (it differs by front-end)."""
    return Field(
        AgentConfig.approval.value,
        description=f"read-only (no edits, no commands), auto-edit (edits applied, {asks}), "
        "or full-auto (commands run too, in the workspace, with a timeout).",
    )


def approval_mode(value: str) -> str:
    """An approval mode's name; ValueError naming the modes otherwise."""
    if value not in ApprovalMode._value2member_map_:
        names = [m.value for m in ApprovalMode]
        raise ValueError(f"must be {', '.join(names[:-1])} or {names[-1]}, not {value!r}")
    return value


Approval = Annotated[str, AfterValidator(approval_mode)]


def sandbox_mode(value: str) -> str:
    """A sandbox mode's name; ValueError naming the modes otherwise."""
    if value not in SandboxMode._value2member_map_:
        raise ValueError(f"must be one of {', '.join(m.value for m in SandboxMode)}, not {value!r}")
    return value


SandboxName = Annotated[str, AfterValidator(sandbox_mode)]


class DeepOptions(BaseModel):
    """Where the deep model answers (the bench's agent commands take these too)."""

    model_config = ConfigDict(title="Models", defer_build=True)

    deep_base_url: Annotated[
        str | None, Flag(env="WHIZ_DEEP_BASE_URL", shown=f"the {DEEP_LOCAL_MODEL} in this process")
    ] = Field(
        None,
        description="The deep model on any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, a "
        "hosted API), spoken to over Chat Completions.",
    )
    deep_model: str | None = Field(None, description="Model id to ask the deep server for.")
    deep_api_key: Annotated[str | None, Flag(env="WHIZ_DEEP_API_KEY")] = Field(
        None, description="Bearer key for the deep server."
    )

    def deep(self) -> DeepSettings:
        return DeepSettings(base_url=self.deep_base_url, model=self.deep_model, api_key=self.deep_api_key)


class ModelOptions(DeepOptions):
    """Where the fast and the deep model answer, and which mode picks between them."""

    model_config = ConfigDict(title="Models", defer_build=True)

    mode: ModeName = mode_field("fast")
    base_url: Annotated[str | None, Flag(shown=f"{DEFAULT_BASE_URL}, or $WHIZ_BASE_URL")] = Field(
        None,
        description="A whiz server. If none answers at the default, the background server whiz keeps "
        "warm for its commands (started if need be).",
    )
    api_key: Annotated[str | None, Flag(env="WHIZ_API_KEY")] = Field(
        None, description="Bearer key for the server."
    )
    model: str | None = Field(
        None, description="Model to request (or to load, when whiz starts its own server)."
    )
    in_process: Annotated[bool, Flag(env="WHIZ_IN_PROCESS")] = Field(
        FastSettings.in_process,
        description="With no server at the default URL, load the model in this process for this command "
        "instead of using (or starting) the background server.",
    )

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str | None) -> str | None:
        return None if value is None else Mode.named(value).value

    def fast(self) -> FastSettings:
        return FastSettings(
            base_url=self.base_url, api_key=self.api_key, model=self.model, in_process=self.in_process
        )


class ConfinementOptions(BaseModel):
    """What confined commands may write and read besides the workspace: the sandbox's allowances."""

    model_config = ConfigDict(title="Safety and the sandbox", defer_build=True)

    secret_file: Annotated[list[str], Flag(env="WHIZ_SECRET_FILES")] = Field(
        default_factory=list,
        description="A glob of more files that look like secrets, beside .env*, keys and credentials (e.g. "
        "'config/prod.yaml'; '!.env.test' takes one back out); or list them in WHIZ_SECRET_FILES. The "
        "model sees such a file only if you name it or approve its READ; sandboxed commands see it only "
        "then too (or with --allow-secret-reads).",
    )
    allow_env_writes: bool = Field(
        SandboxOptions.allow_env_writes,
        description="In workspace-write, let commands change the project's dependency folders (.venv, venv, "
        "node_modules, .tox), read-only otherwise, so pip or npm install work. Risk: what a command "
        "installs there runs unconfined the next time you start Python or node in the project.",
    )
    allow_secret_reads: bool = Field(
        SandboxOptions.allow_secret_reads,
        description="Let confined commands read the workspace's secret files (.env, keys, credentials, and "
        "--secret-file globs), hidden from them otherwise, e.g. for tests that load .env. Risk: a "
        "command the model writes can then pass their values to the model in any encoding. Naming a "
        "file in your task, or approving its READ, lets that one file through instead.",
    )
    sandbox_allow: Annotated[list[str], Flag(metavar="PATH")] = Field(
        default_factory=list,
        description="A file or folder of your home that confined commands may read (read-only), e.g. "
        "~/.config/mytool; or list them as allow = [...] in the config file's [sandbox] table. The rest "
        "of every home folder is hidden from them, but for the toolchains they need (interpreters, "
        "compilers, package caches). Risk: a command the model writes can pass what it reads there to "
        "the model.",
    )

    def confinement(self, mode: str, file: ConfigFile) -> SandboxOptions:
        """The sandbox in `mode`, with these allowances and the config file's `[sandbox]` paths
        (a mistake there is a SandboxConfigError, a ValueError, saying what is wrong)."""
        from whiz.environments.home import allow_list
        from whiz.environments.secret_rules import SecretFiles

        return SandboxOptions(
            SandboxMode(mode),
            allow_env_writes=self.allow_env_writes,
            secret_files=SecretFiles(tuple(self.secret_file)),
            allow_secret_reads=self.allow_secret_reads,
            allow=allow_list(file, self.sandbox_allow),
        )


class SafetyOptions(ConfinementOptions):
    """The safety policy, and where the commands the agent runs may write and reach."""

    policy: str = Field(
        SessionOptions.policy,
        description="What happens to a request flagged as aimed at harming systems (malware, credential "
        "theft, attacks on systems you don't own): refuse, reroute:deep, or allow. Shown either way.",
    )
    policy_model_check: Annotated[bool, Flag("--policy-model-check/--no-policy-model-check")] = Field(
        SessionOptions.policy_model_check,
        description="Ask the fast model about requests the rules cannot decide.",
    )
    sandbox: SandboxName = Field(
        SandboxMode.WORKSPACE_WRITE.value,
        description="Where commands the agent runs (RUN, the test command, heal and swarm checks) may write "
        "and reach: workspace-write (only this folder and a private /tmp; .git read-only; no network; the "
        "home folders hidden but for toolchains and --sandbox-allow paths; no keys or tokens in the "
        "environment), read-only (nothing written but /tmp), or danger-full-access (no confinement: "
        "your rights, network and environment). The confined modes use bubblewrap; without it they "
        "refuse to run. `whiz sandbox -- CMD` shows what a command can do.",
    )

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        return parse_action(value)


class ActingOptions(BaseModel):
    """How the agent acts: its approval mode, its actions, what decides that a task is done."""

    model_config = ConfigDict(title="How the agent acts", defer_build=True)

    approval: Approval = approval_field("commands declined")
    actions: ActionFormat | None = Field(
        None, description="How the model acts: text (edit blocks in its reply) or tools (function calls)."
    )
    test_cmd: str | None = Field(None, description="Run this after edits; the task is done when it passes.")
    check: str | None = Field(
        None,
        description=f"It runs: a command that runs the program briefly (in the sandbox); it passes when it "
        f"exits 0 or is still running after {CHECK_TIMEOUT_S:g} s with no traceback. Decides like "
        "--test-cmd (after it).",
    )
    heal: Annotated[
        int | None, Flag(shown=f"{HEAL_N_DEFAULT} in auto mode with a test command, else off")
    ] = Field(
        None,
        description="With --test-cmd: at the first step and after failed tests, decode N candidates and "
        "keep the one whose tests pass (0 = off). In auto mode one after another, cheapest first, "
        "ending at the first pass: the fast model's greedy reply, the deep model's, then the deep "
        "model's rewrites of the function the change is in.",
    )
    heal_budget: Annotated[float, Field(ge=0)] = Field(
        HealSettings.budget_s or 0,
        description="Seconds a healing step may go on: past it no further rung starts, a candidate still "
        "being written is given up (tests under way finish), and the turn ends with the closest "
        "candidate, saying so. 0: no bound.",
    )
    mutants: Annotated[bool, Flag("--mutants/--no-mutants")] = Field(
        HealSettings.mutants,
        description="When a healing step's first rewrite fails, test the function's one-token changes (a "
        "comparison's bound, a constant off by one, and for or, a regex's missing +, a mutable default, "
        "split for rsplit, a wrong key or variable) before drawing more rewrites: test runs, no model.",
    )
    trace: Annotated[bool, Flag("--trace/--no-trace")] = Field(HealSettings.trace, description=TRACE_HELP)
    found_checks: Annotated[bool, Flag("--found-checks/--no-found-checks")] = Field(
        AgentConfig.found_checks,
        description="In a task that changes behaviour: run the checks the code already has for the function "
        "the task names (its docstring's examples and doctests, a __main__ block's asserts, the "
        "repository's tests of it) in the sandbox, to choose among candidate edits and catch one that "
        "breaks them (never in read-only). With --test-cmd, in a fix: beside it, a candidate that passes "
        "the tests and breaks them losing to one that keeps both.",
    )
    exact_renames: Annotated[bool, Flag("--exact-renames/--no-exact-renames")] = Field(
        AgentConfig.exact_renames,
        description="A task that only renames a Python function, method or class is done on the code's "
        "tokens, every use in every file at once, without asking the model, where its meaning is plain "
        "(one definition, the new name unused); anything more goes to the model.",
    )
    instructions_tokens: Annotated[int, Field(ge=0)] = Field(
        AgentConfig.instructions_tokens,
        description="Budget for the project's AGENTS.md (or CLAUDE.md) files, read from the repository's top "
        "down to this folder into the model's instructions; longer ones are cut, and you are told "
        "(0 = read none).",
    )
    mcp: Annotated[list[str], Flag(metavar="NAME=CMD")] = Field(
        default_factory=list,
        description="Start an MCP server for this run and offer its tools as NAME__tool (CMD split as a "
        "shell would; an http(s):// URL is reached over streamable HTTP). Beside the config file's "
        "[mcp_servers.NAME] tables. Servers run outside the sandbox (docs/mcp.md).",
    )

    @model_validator(mode="after")
    def _heal_fits(self) -> ActingOptions:
        check_heal(self.heal, self.agent_config())
        return self

    def agent_config(self) -> AgentConfig:
        """How the agent acts (`AgentConfig`); `--check` joins the test command: the tests, then
        the check, decide together."""
        return AgentConfig(
            approval=ApprovalMode(self.approval),
            actions=self.actions,
            test_cmd=with_check(self.test_cmd, self.check),
            instructions_tokens=self.instructions_tokens,
            found_checks=self.found_checks,
            exact_renames=self.exact_renames,
        )


JSON_HELP = "Write JSON Lines events on stdout (as `codex exec --json`)."
Json = Annotated[bool, Flag("--json")]
OWN = ConfigDict(title="", defer_build=True)
"""A command's own options: listed first, under no heading."""


class ExecOptions(ActingOptions, ModelOptions, SafetyOptions):
    """`whiz exec`."""

    model_config = OWN

    json_: Json = Field(False, description=JSON_HELP)
    mode: ModeName = mode_field("auto")


class ResumeOptions(ExecOptions):
    """`whiz resume`: exec's options, and which session."""

    model_config = OWN

    session: str | None = Field(None, description="The session id to resume.")
    last: bool = Field(False, description="Resume the latest session in this directory.")
    mode: ModeName = mode_field(None, resumed=True)


class CodeOptions(ActingOptions, ModelOptions, SafetyOptions):
    """`whiz code` (and plain `whiz`)."""

    model_config = OWN

    resume: str | None = Field(None, description="Continue a stored session (its id, from /resume).")
    last: bool = Field(False, description="Continue the latest session in this directory.")
    approval: Approval = approval_field("each command asks you first")
    mode: ModeName = mode_field(None)


class AcpOptions(ActingOptions, ModelOptions, SafetyOptions):
    """`whiz acp`."""

    model_config = OWN

    verbose: bool = Field(False, description="Log what happens on stderr.")
    approval: Approval = approval_field("each command asks you in the editor first")
    mode: ModeName = mode_field(None)


class HealOptions(ModelOptions, SafetyOptions):
    """`whiz heal`: best of N."""

    model_config = OWN

    test_cmd: str | None = Field(None, description="The tests that decide: a candidate wins when it exits 0.")
    check: str | None = ActingOptions.model_fields["check"]
    n: Annotated[int, Flag("-n"), between(1, HealSettings.MAX_N)] = Field(
        HealSettings.n, description="Candidates per round, decoded in parallel."
    )
    temperature: Annotated[float, between(0, 2)] = Field(
        HealSettings.temperature, description="Sampling temperature of the candidates."
    )
    rounds: Annotated[int, Field(ge=1)] = Field(
        HealSettings.rounds, description="Rounds before giving up (each later one sees the best failure)."
    )
    test_timeout: Annotated[float, Field(gt=0)] = Field(
        HealSettings.test_timeout_s,
        description="Seconds each candidate's tests may run at most; once a run of them has ended by "
        "itself (the baseline's), ten times the slowest such run, and 10 s at least.",
    )
    budget: Annotated[float, Field(ge=0)] = Field(
        HealSettings.budget_s or 0,
        description="Seconds the heal may go on: past it no further round starts and a candidate "
        "still being written is given up (tests under way finish). 0: no bound.",
    )
    sequential: bool = Field(
        not HealSettings.parallel, description="Decode candidates one after another (to compare)."
    )
    seed: int | None = Field(HealSettings.seed, description="Candidate i samples with seed + i.")
    all_: Annotated[bool, Flag("--all")] = Field(
        not HealSettings.first_pass,
        description="Let every candidate finish and keep the smallest passing diff. Off: the first "
        "candidate to pass ends the round and the ones still being written are cancelled.",
    )
    allow_test_edits: bool = Field(
        HealSettings.allow_test_edits,
        description="Let candidates change the tests (files the test command names, test_*.py, tests/ ...). "
        "Off: such a candidate is rejected, since the tests decide.",
    )
    localize: bool = Field(
        True,
        description="When the tests fail now, first ask where the bug is (file, function, a hypothesis), "
        "then make the first round N rewrites of that function; a repeat of a tested change is not "
        "tested again. Off: every round is plain candidates.",
    )
    mutants: Annotated[bool, Flag("--mutants/--no-mutants")] = Field(
        HealSettings.mutants,
        description="With --localize, after the repair round: test the localized function's one-token "
        "changes (a comparison's bound, a constant off by one, and for or, ...), no model.",
    )
    trace: Annotated[bool, Flag("--trace/--no-trace")] = Field(HealSettings.trace, description=TRACE_HELP)
    json_: Json = Field(False, description=JSON_HELP)

    @model_validator(mode="after")
    def _tests_decide(self) -> HealOptions:
        if self.test_cmd is not None and not self.test_cmd.strip():
            raise ValueError("--test-cmd is empty; healing needs tests to decide")
        if self.test_cmd is None and self.check is None:
            raise ValueError("healing needs --test-cmd or --check to decide")
        return self

    def decider(self) -> str:
        """The command that decides: the tests, then the check."""
        return with_check(self.test_cmd, self.check) or ""

    def heal_settings(self, sandbox: SandboxOptions) -> HealSettings:
        return HealSettings(
            n=self.n, temperature=self.temperature, rounds=self.rounds, test_timeout_s=self.test_timeout,
            parallel=not self.sequential, seed=self.seed, first_pass=not self.all_,
            allow_test_edits=self.allow_test_edits, localize=self.localize, sandbox=sandbox,
            budget_s=self.budget or None, mutants=self.mutants, trace=self.trace,
        )  # fmt: skip


class SwarmOptions(ModelOptions, SafetyOptions):
    """`whiz swarm`: a director and its workers."""

    model_config = OWN

    workers: Annotated[int, Flag(also=("-k",)), between(1, MAX_WORKERS)] = Field(
        3, description="Micro-tasks worked on at once."
    )
    test_cmd: str | None = Field(None, description="Run at the end; the swarm is done when it passes.")
    plan: Path | None = Field(
        None,
        description='A JSON plan instead of the director\'s: {"tasks": [{"id", "title", "instruction", '
        '"files", "check"}]}.',
    )
    retries: Annotated[int, Field(ge=0)] = Field(
        2, description="Fast retries of a failed micro-task before deep."
    )
    check_timeout: Annotated[float, Field(gt=0)] = Field(
        120.0, description="Seconds a micro-task's check may run."
    )
    json_: Json = Field(False, description=JSON_HELP)
    mode: ModeName = mode_field("auto")

    def swarm_settings(self, sandbox: SandboxOptions) -> SwarmSettings:
        from whiz.modes.swarm import SwarmSettings

        return SwarmSettings(
            workers=self.workers, retries=self.retries, check_timeout_s=self.check_timeout,
            test_cmd=self.test_cmd, sandbox=sandbox,
        )  # fmt: skip


class SandboxCommandOptions(ConfinementOptions):
    """`whiz sandbox`: one command, confined as the agent's are."""

    model_config = OWN

    mode: SandboxName = Field(
        SandboxMode.WORKSPACE_WRITE.value,
        description=", ".join(m.value for m in SandboxMode) + ": as --sandbox of the agent's commands.",
    )
    timeout: Annotated[float | None, Field(gt=0)] = Field(None, description="Seconds before it is stopped.")
