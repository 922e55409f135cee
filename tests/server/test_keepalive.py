"""A stream shows life at once and all through a long prefill, on every streaming API, in the form
its clients accept: a client with an idle timeout (the Codex CLI's) never sees the server silent
for long while a slow model reads a long prompt."""

from __future__ import annotations

import json
import os
import subprocess
import time

import httpx
import pytest
from websockets.sync.client import connect

from tests.clients.conftest import npm_client
from tests.clients.test_codex_cli import CODEX_VERSION
from whiz.bench.codex_restart import configure_codex
from whiz.server.keepalive import KEEPALIVE_S

LONG = "Please read all of this. " * 150  # ~3,700 byte tokens on the fake engine
SLOW_PREFILL = {"token_s": 0.0015}  # ~0.8 s a 512-token chunk: ~5.5 s before the first token


def _timed_lines(response: httpx.Response) -> list[tuple[float, str]]:
    start = time.monotonic()
    return [(time.monotonic() - start, line) for line in response.iter_lines()]


def _assert_alive(times: list[float], first_token_s: float) -> None:
    assert first_token_s > 2 * KEEPALIVE_S + 0.5, "the prefill was not slow enough to show anything"
    assert times[0] < 1.0, f"first bytes after {times[0]:.1f} s"
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(gaps) < KEEPALIVE_S + 1.0, f"a silence of {max(gaps):.1f} s"


def test_a_chat_stream_sends_comment_lines_while_the_prompt_prefills(serve_fake):
    served = serve_fake(engine_kw=SLOW_PREFILL)
    body = {"messages": [{"role": "user", "content": LONG}], "stream": True, "max_tokens": 3}
    with httpx.stream("POST", f"{served.base_url}/chat/completions", json=body, timeout=30) as r:
        lines = [(t, line) for t, line in _timed_lines(r) if line]
    comments = [t for t, line in lines if line.startswith(":")]
    content = [t for t, line in lines if '"content": "P' in line or '"content": "e' in line]
    assert len(comments) >= 2
    _assert_alive([t for t, _ in lines], content[0] if content else lines[-1][0])
    assert lines[-1][1] == "data: [DONE]"


def test_the_openai_sdk_reads_a_kept_alive_chat_stream(serve_fake, sdk):
    served = serve_fake(engine_kw=SLOW_PREFILL)
    client = sdk(served)
    stream = client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": LONG[:1800] + "end"}], stream=True, max_tokens=200
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text.startswith("echo: Please read")


def test_a_messages_stream_sends_pings_while_the_prompt_prefills(serve_fake):
    served = serve_fake(engine_kw=SLOW_PREFILL)
    body = {"model": "fake", "max_tokens": 3, "stream": True, "messages": [{"role": "user", "content": LONG}]}
    with httpx.stream("POST", f"{served.root}/v1/messages", json=body, timeout=30) as r:
        lines = [(t, line) for t, line in _timed_lines(r) if line.startswith("event: ")]
    pings = [t for t, line in lines if line == "event: ping"]
    delta = next(t for t, line in lines if line == "event: content_block_delta")
    assert len(pings) >= 3  # Anthropic's own after message_start, then one per silence
    _assert_alive([t for t, _ in lines], delta)
    assert lines[-1][1] == "event: message_stop"


def test_a_responses_stream_repeats_in_progress_while_the_prompt_prefills(serve_fake, sdk):
    served = serve_fake(engine_kw=SLOW_PREFILL)
    body = {"model": "fake", "input": LONG, "stream": True, "max_output_tokens": 3}
    with httpx.stream("POST", f"{served.base_url}/responses", json=body, timeout=30) as r:
        events = [(t, json.loads(line[6:])) for t, line in _timed_lines(r) if line.startswith("data: ")]
    kinds = [e["type"] for _, e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds.count("response.in_progress") >= 3
    assert [e["sequence_number"] for _, e in events] == list(range(len(events)))
    # Each keep-alive says how far the prompt's prefill has come.
    progress = [e["prompt_progress"] for _, e in events if "prompt_progress" in e]
    assert len(progress) >= 2 and progress[-1]["total"] > 3000
    assert [p["processed"] for p in progress] == sorted(p["processed"] for p in progress)
    assert 0 < progress[0]["processed"] < progress[-1]["processed"] <= progress[-1]["total"]
    delta = next(t for t, e in events if e["type"] == "response.output_text.delta")
    _assert_alive([t for t, _ in events], delta)
    assert kinds[-1] == "response.incomplete"  # at max_output_tokens
    # The openai SDK reads such a stream to its end.
    stream = sdk(served).responses.create(model="fake", input=LONG[:1800], stream=True, max_output_tokens=3)
    assert [e.type for e in stream][-1] == "response.incomplete"


def test_a_responses_websocket_repeats_in_progress_while_the_prompt_prefills(serve_fake):
    served = serve_fake(engine_kw=SLOW_PREFILL)
    url = served.root.replace("http://", "ws://") + "/v1/responses"
    with connect(url, max_size=None) as ws:
        ws.send(
            json.dumps({"type": "response.create", "model": "fake", "input": LONG, "max_output_tokens": 3})
        )
        start = time.monotonic()
        events = []
        while not events or events[-1][1]["type"] not in (
            "response.completed",
            "response.incomplete",
            "error",
        ):
            events.append((time.monotonic() - start, json.loads(ws.recv(timeout=30))))
    kinds = [e["type"] for _, e in events]
    assert kinds.count("response.in_progress") >= 3 and kinds[-1] == "response.incomplete"
    delta = next(t for t, e in events if e["type"] == "response.output_text.delta")
    _assert_alive([t for t, _ in events], delta)


@pytest.mark.parametrize("websocket", [False, True], ids=["http", "websocket"])
def test_the_codex_cli_waits_out_a_prefill_longer_than_its_idle_timeout(serve_fake, tmp_path, websocket):
    # Codex gives up on a stream silent for `stream_idle_timeout_ms`; here 4 s, while its opening
    # (~30k byte tokens on the fake engine) prefills for about 9 s.
    codex_bin = npm_client("@openai/codex", CODEX_VERSION, "codex")
    served = serve_fake(
        script=lambda conversation: "Nothing to change.", engine_kw={"n_ctx": 65536, "token_s": 0.0003}
    )
    home, work = tmp_path / "codex-home", tmp_path / "work"
    configure_codex(home, served.root, websocket=websocket)
    with (home / "config.toml").open("a") as config:
        config.write("stream_idle_timeout_ms = 4000\n")
    work.mkdir()
    env = {**os.environ, "CODEX_HOME": str(home), "RUST_LOG": "codex_api=debug"}
    start = time.monotonic()
    done = subprocess.run(
        [str(codex_bin), "exec", "--skip-git-repo-check", "Say whether hello.py needs a change"],
        cwd=work, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Nothing to change." in done.stdout
    assert took > 6, f"the prefill took only {took:.1f} s: it did not outlast the idle timeout"
    if websocket:
        assert "successfully connected to Responses WebSocket" in done.stderr
