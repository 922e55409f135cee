"""Warming a client's opening: the real client's first request is caught by a stand-in server (the
client stops there: nothing is generated, no tool runs, nothing is left in the project), then sent
to whiz to prefill only; `whiz setup` starts it in the background and says so."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path

import httpx

from tests.clients.conftest import npm_client
from tests.clients.programs import CLAUDE_CODE_VERSION, CODEX_VERSION, aider_client
from whiz.commands.setup import run_setup
from whiz.setup import writer_for
from whiz.setup.base import Server, Where
from whiz.setup.capture import Captured
from whiz.setup.warm import _capture, replay, replay_body, warm, whiz_opening


def project(tmp_path: Path) -> tuple[Path, Where]:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (work / "app.py").write_text("def main():\n    return 1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "WHIZ_"))}
    return work, Where(home, {**env, "HOME": str(home)})


def test_a_prefill_only_request_asks_for_no_reply() -> None:
    messages = Captured("/v1/messages", {"model": "whiz", "stream": True, "max_tokens": 32000, "tools": [{}]})
    assert replay_body(messages) == {"model": "whiz", "stream": False, "max_tokens": 1, "tools": [{}]}
    chat = Captured(
        "/v1/chat/completions", {"stream": True, "stream_options": {}, "max_completion_tokens": 9}
    )
    assert replay_body(chat) == {"stream": False, "max_tokens": 1}
    responses = Captured(
        "/v1/responses", {"stream": True, "max_output_tokens": 9, "previous_response_id": "r"}
    )
    assert replay_body(responses) == {"stream": False, "generate": False, "store": False}


def test_claude_codes_opening_is_caught_as_it_sends_it_and_prefilled(serve_fake, tmp_path: Path) -> None:
    claude = npm_client("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude")
    work, where = project(tmp_path)
    server = serve_fake(engine_kw={"n_ctx": 262144})
    target = Server(server.root, 32768, reachable=True)
    assert run_setup("claude", base_url=server.root, warm=False, where=where, err=io.StringIO()) == 0
    plan = writer_for("claude").plan(target, where)
    call = _capture("claude", plan, target, where, work, str(claude))
    # The opening, with its tools: the capture stops the client a moment after it (its own rule),
    # not at its deadline.
    assert call.path == "/v1/messages" and len(call.body["tools"]) > 5
    assert call.size > 20_000, "Claude Code's whole opening: its system prompt and tools"
    assert str(work) in json.dumps(call.body), "sent from the project's folder, as the user's will be"
    assert sorted(p.name for p in work.iterdir()) == ["app.py"], "nothing is left in the project"
    said = replay(call, target)
    assert int(said.split()[0]) > 10_000, said  # the fake engine counts a byte a token


def test_codex_opening_warms_end_to_end(serve_fake, tmp_path: Path) -> None:
    codex = npm_client("@openai/codex", CODEX_VERSION, "codex")
    work, where = project(tmp_path)
    server = serve_fake(engine_kw={"n_ctx": 262144})
    assert run_setup("codex", base_url=server.root, warm=False, where=where, err=io.StringIO()) == 0
    said = warm("codex", Server(server.root, 32768, reachable=True), where, work, binary=str(codex))
    assert said.startswith("codex's opening (") and "/v1/responses" in said


def test_whiz_acps_own_opening_is_its_system_prompt_with_the_projects_instructions(serve_fake, tmp_path):
    work, _ = project(tmp_path)
    (work / "AGENTS.md").write_text("Use tabs.\n")
    call = whiz_opening(work)
    assert "def main()" in call.body["instructions"] and "Use tabs." in call.body["instructions"]
    server = serve_fake()
    assert replay(call, Server(server.root, reachable=True))


def test_setup_starts_warming_in_the_background_and_says_it_is_safe_to_go_on(serve_fake, tmp_path):
    work, where = project(tmp_path)
    whiz_home = tmp_path / "whiz-home"
    where = Where(where.home, {**where.env, "WHIZ_HOME": str(whiz_home)})
    server = serve_fake()
    # The engine holds the warm-up's prefill until setting up has returned: a setup that waited
    # for it would wait until the hold gives up, and find it prefilled.
    runtime, released = server.engine.runtime, threading.Event()
    decode = runtime.decode

    def held_decode(rows):
        released.wait(timeout=60)
        return decode(rows)

    runtime.decode = held_decode
    err = io.StringIO()
    cwd = os.getcwd()
    os.chdir(work)
    try:
        assert run_setup("zed", base_url=server.root, where=where, err=err) == 0
    finally:
        os.chdir(cwd)
    log = whiz_home / "setup" / "warm-zed.log"
    assert "prefilled" not in log.read_text(), "setting up waited for the warm-up"
    released.set()
    said = err.getvalue()
    assert "warming zed's opening" in said and "it is safe to go on" in said
    for _ in range(300):
        if "prefilled" in log.read_text() or "not warmed" in log.read_text():
            break
        time.sleep(0.1)
    assert "zed's opening" in log.read_text() and "prefilled" in log.read_text(), log.read_text()


def test_no_warming_without_a_server(tmp_path: Path) -> None:
    _, where = project(tmp_path)
    err = io.StringIO()
    assert run_setup("claude", base_url="http://127.0.0.1:9", where=where, err=err) == 0
    assert "warming claude's opening" not in err.getvalue()


def test_a_server_that_refuses_the_opening_is_reported(serve_fake) -> None:
    server = serve_fake(api_keys=["k1"])
    call = Captured(
        "/v1/chat/completions", {"model": "whiz", "messages": [{"role": "user", "content": "hi"}]}
    )
    try:
        replay(call, Server(server.root, api_key="wrong", reachable=True))
    except RuntimeError as exc:
        assert "refused the opening (401)" in str(exc)
    else:
        raise AssertionError("a refused warm-up must say so")
    assert httpx.get(f"{server.root}/health").status_code == 200


def test_aiders_opening_is_caught_without_touching_the_project(serve_fake, tmp_path: Path) -> None:
    # Aider offers to make a git repository where there is none, and keeps its chat history in
    # the folder it runs in: the warm-up's run must do neither.
    aider = aider_client()
    work, where = project(tmp_path)
    server = Server(serve_fake().root, 32768, reachable=True)
    assert run_setup("aider", base_url=server.root, warm=False, where=where, err=io.StringIO()) == 0
    call = _capture("aider", writer_for("aider").plan(server, where), server, where, work, str(aider))
    assert call.path == "/v1/chat/completions" and call.body["messages"][0]["role"] == "system"
    assert sorted(p.name for p in work.iterdir()) == ["app.py"]
