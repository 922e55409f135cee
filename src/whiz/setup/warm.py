"""Warming a client's fixed opening into the server's prefix cache, in the background.

A client's first request carries its whole system prompt and tool list (Claude Code's is about
48 KB), minutes of prefill on a CPU. `whiz setup` starts `python -m whiz.setup.warm` detached: it
catches that request as the client really sends it from this folder (`capture.py`: the client runs
once against a stand-in server with a copy of the configuration just written, pointed there), then
sends it to whiz to prefill only (Responses' `generate: false`, else a one-token reply). The server
keeps the prefill in its disk prefix cache, so the user's first real turn restores it instead of
prefilling it: the later part of the opening (the task, the date) differs, the long start does not.

For Zed the agent is whiz's own (`whiz acp`), whose opening whiz knows: its system prompt for this
folder is sent directly. A warm-up that fails costs nothing but itself; its log says why.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx

from whiz.setup import writer_for
from whiz.setup.base import MODEL_NAME, Plan, Server, Where
from whiz.setup.capture import Captured, StandIn, capture_opening

WARM_TIMEOUT_S = 1800.0
"""A 20k-token opening prefills in minutes on two cores; a busy server takes longer."""
ASK = "hi"
"""The task the client is started with: its words come after the opening, so they do not matter."""


def opening_command(client: str, binary: str, scratch: Path) -> list[str] | None:
    """How to start `client` headless with one short task (None: whiz's own agent, nothing to run)."""
    match client:
        case "claude" | "qwen":
            return [binary, "-p", ASK]
        case "opencode":
            return [binary, "run", ASK]
        case "codex":
            # The stand-in speaks HTTP only; the opening is the same over the WebSocket.
            return [
                binary,
                "exec",
                "--skip-git-repo-check",
                "-c",
                "model_providers.whiz.supports_websockets=false",
                ASK,
            ]
        case "aider":
            history = [
                "--chat-history-file",
                str(scratch / "chat.md"),
                "--input-history-file",
                str(scratch / "in"),
            ]
            return [
                binary,
                "--message",
                ASK,
                "--no-check-update",
                "--no-analytics",
                "--no-git",
                *history,
            ]
    return None


def start_warming(client: str, server: Server, where: Where, cwd: Path | None = None) -> str:
    """Start the warm-up of `client`'s opening in the background; the line that says so."""
    cwd = cwd or Path.cwd()
    home = Path(where.env.get("WHIZ_HOME") or _data_home())
    log = home / "setup" / f"warm-{client}.log"
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "whiz.setup.warm", client, "--root", server.root, "--cwd", str(cwd)]
        command += ["--window", str(server.context_window)]
        env = {**os.environ, **where.env}
        if server.api_key:
            env["WHIZ_API_KEY"] = server.api_key
        with open(log, "w") as out:
            # It forks and returns at once (`--detach`): the warm-up is nobody's child here, and
            # outlives this command and its terminal.
            subprocess.run(
                [*command, "--detach"], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=env, timeout=60, check=True,
            )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return f"could not start warming {client}'s opening: {exc}"
    return (
        f"warming {client}'s opening (its system prompt and tools) into the server's prefix cache in the "
        f"background (log: {log}); it is safe to go on: a turn meanwhile works (sharing the CPU with "
        "it), and once it is done the first turn starts warm"
    )


def warm(client: str, server: Server, where: Where, cwd: Path, binary: str | None = None) -> str:
    """Catch `client`'s opening and prefill it on `server`; a line saying what was done. Raises
    `RuntimeError` saying why when there was nothing to warm."""
    started = time.monotonic()
    if client == "zed":
        call = whiz_opening(cwd)
    else:
        plan = writer_for(client).plan(server, where)
        binary = binary or shutil.which(plan.run.split()[0], path=where.env.get("PATH"))
        if binary is None:
            raise RuntimeError(f"{plan.run.split()[0]} is not on PATH: there is no opening to warm")
        call = _capture(client, plan, server, where, cwd, binary)
    answer = replay(call, server)
    seconds = time.monotonic() - started
    return (
        f"{client}'s opening ({call.size // 1000} KB, to {call.path}) prefilled in {seconds:.0f} s: {answer}"
    )


def _capture(client: str, plan: Plan, server: Server, where: Where, cwd: Path, binary: str) -> Captured:
    stand_in = StandIn()
    try:
        with tempfile.TemporaryDirectory(prefix="whiz-warm-") as scratch:
            home = Path(scratch) / "home"
            profile = {
                "HOME": str(home),
                "XDG_CONFIG_HOME": str(home / ".config"),
                "CODEX_HOME": str(home / ".codex"),
            }
            # The user's files as written, then the same set-up pointed at the stand-in.
            for change in plan.changes:
                if change.path.is_relative_to(where.home) and change.path.exists():
                    copy = home / change.path.relative_to(where.home)
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(change.path, copy)
            there = Where(home, profile)
            for change in writer_for(client).plan(replace(server, root=stand_in.root), there).changes:
                change.path.parent.mkdir(parents=True, exist_ok=True)
                change.path.write_text(change.text)
            env = {
                k: v for k, v in where.env.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "CLAUDE_"))
            }
            cache = where.env.get("XDG_CACHE_HOME") or str(where.home / ".cache")
            env.update(profile, XDG_CACHE_HOME=cache, PWD=str(cwd))
            command = opening_command(client, binary, Path(scratch))
            assert command is not None
            call = capture_opening(command, cwd, env, stand_in)
    finally:
        stand_in.close()
    if call is None:
        raise RuntimeError(f"{client} made no model call (is it installed and working?)")
    return call


def whiz_opening(cwd: Path) -> Captured:
    """The opening of whiz's own agent in `cwd` (as `whiz acp` and `whiz code` start it), as a
    prefill-only Responses request."""
    from whiz.agent.config import AgentConfig
    from whiz.agent.context.instructions import read_instructions
    from whiz.agent.context.prompt import system_prompt
    from whiz.agent.project.workspace import Workspace

    config = AgentConfig()
    ws = Workspace(cwd, config.secrets)
    project = read_instructions(ws, config.instructions_tokens).render()
    instructions = system_prompt(ws, "text", test_cmd=None, map_tokens=config.map_tokens, project=project)
    return Captured("/v1/responses", {"model": MODEL_NAME, "instructions": instructions, "input": ASK})


def replay_body(call: Captured) -> dict:
    """`call`'s body as a prefill-only request: no stream, no reply (or a one-token one)."""
    body = {k: v for k, v in call.body.items() if k not in ("stream_options", "previous_response_id")}
    body["stream"] = False
    if call.path.endswith("/responses"):
        body["generate"], body["store"] = False, False
        body.pop("max_output_tokens", None)
    else:
        body.pop("max_completion_tokens", None)
        body["max_tokens"] = 1
    return body


def replay(call: Captured, server: Server) -> str:
    """Send `call` to `server` to prefill; what the server said of it."""
    headers = {"authorization": f"Bearer {server.key}", "x-api-key": server.key}
    url = server.root + call.path
    try:
        answer = httpx.post(url, json=replay_body(call), headers=headers, timeout=WARM_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise RuntimeError(f"the server at {server.root} did not answer: {exc}") from None
    if not answer.is_success:
        raise RuntimeError(f"the server refused the opening ({answer.status_code}): {answer.text[:300]}")
    usage = (answer.json() or {}).get("usage") or {}
    tokens = usage.get("input_tokens") or usage.get("prompt_tokens")
    return f"{tokens} tokens" if tokens else "done"


def _data_home() -> Path:
    from whiz.agent.store.sessions import data_home

    return data_home()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m whiz.setup.warm", description=__doc__.splitlines()[0])
    parser.add_argument("client")
    parser.add_argument("--root", required=True)
    parser.add_argument("--cwd", type=Path, default=Path.cwd())
    parser.add_argument("--window", type=int, default=None)
    parser.add_argument(
        "--detach", action="store_true", help="Go on in the background, in a session of its own."
    )
    args = parser.parse_args(argv)
    if args.detach:
        if os.fork():
            return 0
        os.setsid()
    env = dict(os.environ)
    server = Server(args.root, args.window or 0, env.get("WHIZ_API_KEY"), reachable=True)
    where = Where(Path(env.get("HOME") or Path.home()), env)
    try:
        print(warm(args.client, server, where, args.cwd), flush=True)
    except Exception as exc:  # the log is all anyone sees of a background warm-up
        print(f"not warmed: {exc}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
