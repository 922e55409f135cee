"""`whiz` and `whiz code` as users start them, against a whiz server on the fake engine, in a pty."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import free_port
from whiz.engine.fake import echo_script, last_user_message

STORY = "once upon a time " + " ".join(f"w{i}" for i in range(600)) + " THE-END"


def story_or_echo(conversation: str) -> str:
    return STORY if "story" in last_user_message(conversation) else echo_script(conversation)


def test_whiz_without_a_command_starts_the_ui_over_the_server(serve_fake, whiz_code):
    served = serve_fake(script=story_or_echo, engine_kw={"step_s": 0.002})
    term = whiz_code(WHIZ_BASE_URL=served.base_url)
    term.wait_for(r" fake · fast · auto-edit · sess_\w+ · ctx \d+%  ·  /help")
    term.enter("say hello")
    term.wait_for("echo: say hello")
    term.wait_for(r"── done in [\d.]+ s · 1 model call · ttft \d+ ms · [\d.]+ tok/s")
    term.enter("/model")
    term.wait_for("● fake")
    term.enter("/model gpt-9")
    term.wait_for("'gpt-9' is not served here; the server lists: fake")
    term.press("ctrl-d")
    assert term.wait_exit() == 0


def test_esc_stops_the_server_generating_too(serve_fake, whiz_code):
    served = serve_fake(script=story_or_echo, engine_kw={"step_s": 0.02})
    term = whiz_code("code", "--base-url", served.base_url)
    term.wait_for("·  /help")
    term.enter("tell me a story")
    term.wait_for("w5 ")
    assert served.engine.status()["active"] == 1
    term.press("esc")
    term.wait_for("■ stopped", timeout_s=10)
    deadline = time.monotonic() + 10
    while served.engine.status()["active"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert served.engine.status()["active"] == 0
    assert "THE-END" not in term.settle(1.0)
    term.enter("say hello again")  # the connection is still good
    term.wait_for("echo: say hello again")


def test_no_server_at_the_url_is_one_clear_line(whiz_code):
    url = f"http://127.0.0.1:{free_port()}"
    term = whiz_code("code", "--base-url", url)
    term.wait_for(f"error: no whiz server answers at {url}")
    assert term.wait_exit() == 2


def test_without_a_terminal_it_says_to_use_exec(project: Path, term_env):
    done = subprocess.run(
        [sys.executable, "-m", "whiz", "code"],
        cwd=project,
        env=term_env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "whiz code needs a terminal" in done.stderr
    assert "whiz exec" in done.stderr


def test_bad_options_are_refused_before_the_ui_starts(project: Path, term_env):
    done = subprocess.run(
        [sys.executable, "-m", "whiz", "code", "--approval", "sometimes"],
        cwd=project,
        env=term_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--approval must be read-only, auto-edit or full-auto" in done.stderr


def test_help_still_works(project: Path, term_env):
    done = subprocess.run(
        [sys.executable, "-m", "whiz", "--help"], cwd=project, env=term_env, capture_output=True, text=True
    )
    assert done.returncode == 0
    assert "code" in done.stdout and "exec" in done.stdout


def test_a_refused_api_key_is_one_clear_line(serve_fake, whiz_code):
    served = serve_fake(api_keys=["sesame"])
    term = whiz_code("code", "--base-url", served.base_url, "--api-key", "wrong")
    term.wait_for(f"error: the server at {served.base_url} refused the API key")
    assert term.wait_exit() == 2


def test_a_server_that_dies_fails_the_turn_with_one_line_and_the_ui_stays(project: Path, term_env, whiz_code):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "whiz", "serve", "--model", "fake", "--port", str(port)],
        env=term_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_healthy(url)
        term = whiz_code("code", "--base-url", url)
        term.enter("say hello")
        term.wait_for("echo: say hello")
        term.wait_for("── done in")
    finally:
        server.terminate()
        server.wait(timeout=30)
    term.enter("say more")
    failed = term.wait_for(r"✗ failed: (.*)")
    print(failed.group(0))
    assert "Traceback" not in term.text()
    assert failed.group(1).strip()
    term.enter("/help")
    term.wait_for("(?m)^/resume")


def wait_healthy(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"no server at {url}"
        time.sleep(0.1)


def test_resuming_an_unknown_session_is_one_clear_line(serve_fake, whiz_code):
    served = serve_fake()
    term = whiz_code("code", "--base-url", served.base_url, "--resume", "sess_nope")
    term.wait_for("error: no session 'sess_nope'")
    assert term.wait_exit() == 2
