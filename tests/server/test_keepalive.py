"""A stream shows life at once and all through a long prefill, on every streaming API, in the form
its clients accept: a client with an idle timeout (the Codex CLI's) never sees the server silent
for long while a slow model reads a long prompt."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import httpx
import pytest
from websockets.sync.client import connect

from tests.clients.conftest import npm_client
from tests.clients.programs import CODEX_VERSION
from whiz.bench.codex_restart import configure_codex

LONG = "Please read all of this. " * 150  # ~3,700 byte tokens on the fake engine
SLOW_PREFILL = {"token_s": 0.0015}  # ~0.8 s a 512-token chunk: a prefill the SDK must read through


class HeldPrefill:
    """The fake engine's prefill, held: its second and third prompt chunks each wait until the
    client has seen one more keep-alive (`beat()`), so the model is silent for as long as the
    keep-alives take to come, on a fast machine or a loaded one, and a stream that sent none
    would be held until `GIVE_UP_S` (and fail)."""

    HELD = 2
    GIVE_UP_S = 60

    def __init__(self, served) -> None:
        runtime = served.engine.runtime
        self._decode = runtime.decode
        runtime.decode = self._held_decode
        self._beats = threading.Semaphore(0)
        self.chunks = 0
        """Prompt chunks decoded (or under way)."""
        self.waited_out = False

    def _held_decode(self, rows):
        if len(rows) >= 256:  # a prompt chunk, not a decode step
            if 1 <= self.chunks <= self.HELD and not self._beats.acquire(timeout=self.GIVE_UP_S):
                self.waited_out = True
            self.chunks += 1
        return self._decode(rows)

    def read(self, lines, is_beat) -> list[tuple[int, str]]:
        """`lines`, each with the prompt chunks decoded when it came; a beat for each keep-alive."""
        seen = []
        for line in lines:
            seen.append((self.chunks, line))
            if is_beat(line):
                self._beats.release()
        return seen

    def assert_alive(self, seen: list[tuple[int, str]], is_beat, is_content) -> None:
        """The stream began before its prompt was read and showed life through the held prefill."""
        assert seen[0][0] <= 1, "nothing was sent before the prompt was read"
        first = next(i for i, (_, line) in enumerate(seen) if is_content(line))
        beats = sum(1 for _, line in seen[:first] if is_beat(line))
        assert beats >= self.HELD and not self.waited_out, f"{beats} keep-alives before the first token"


def after_the_first(is_event):
    """`is_event`, false the first time it holds (an API's own event at the start, not a keep-alive)."""
    seen = []

    def beat(line) -> bool:
        if not is_event(line):
            return False
        seen.append(line)
        return len(seen) > 1

    return beat


def test_a_chat_stream_sends_comment_lines_while_the_prompt_prefills(serve_fake):
    served = serve_fake()
    held = HeldPrefill(served)
    body = {"messages": [{"role": "user", "content": LONG}], "stream": True, "max_tokens": 3}

    def is_beat(line: str) -> bool:
        return line.startswith(":")

    with httpx.stream("POST", f"{served.base_url}/chat/completions", json=body, timeout=90) as r:
        lines = [(at, line) for at, line in held.read(r.iter_lines(), is_beat) if line]
    assert len([line for _, line in lines if is_beat(line)]) >= 2
    held.assert_alive(lines, is_beat, lambda line: '"content": "P' in line or '"content": "e' in line)
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
    served = serve_fake()
    held = HeldPrefill(served)
    body = {"model": "fake", "max_tokens": 3, "stream": True, "messages": [{"role": "user", "content": LONG}]}
    is_beat = after_the_first(lambda line: line == "event: ping")  # Anthropic's own after message_start
    with httpx.stream("POST", f"{served.root}/v1/messages", json=body, timeout=90) as r:
        lines = [(at, line) for at, line in held.read(r.iter_lines(), is_beat) if line.startswith("event: ")]
    pings = [line for _, line in lines if line == "event: ping"]
    assert len(pings) >= 3  # Anthropic's own after message_start, then one per silence
    ping = after_the_first(lambda line: line == "event: ping")
    held.assert_alive(lines, ping, lambda line: line == "event: content_block_delta")
    assert lines[-1][1] == "event: message_stop"


def _is_in_progress(line: str) -> bool:
    # The event's data (over SSE, not its `event:` line as well); a response's status is "in_progress".
    return line.startswith(("data: ", "{")) and '"response.in_progress"' in line


def test_a_responses_stream_repeats_in_progress_while_the_prompt_prefills(serve_fake, sdk):
    served = serve_fake()
    held = HeldPrefill(served)
    body = {"model": "fake", "input": LONG, "stream": True, "max_output_tokens": 3}
    with httpx.stream("POST", f"{served.base_url}/responses", json=body, timeout=90) as r:
        lines = [
            (at, line)
            for at, line in held.read(r.iter_lines(), after_the_first(_is_in_progress))
            if line.startswith("data: ")
        ]
    events = [json.loads(line[6:]) for _, line in lines]
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds.count("response.in_progress") >= 3
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    # Each keep-alive says how far the prompt's prefill has come.
    progress = [e["prompt_progress"] for e in events if "prompt_progress" in e]
    assert len(progress) >= 2 and progress[-1]["total"] > 3000
    assert [p["processed"] for p in progress] == sorted(p["processed"] for p in progress)
    assert 0 < progress[0]["processed"] < progress[-1]["processed"] <= progress[-1]["total"]
    held.assert_alive(lines, _is_in_progress, lambda line: "response.output_text.delta" in line)
    assert kinds[-1] == "response.incomplete"  # at max_output_tokens
    # The openai SDK reads such a stream to its end.
    stream = sdk(served).responses.create(model="fake", input=LONG[:1800], stream=True, max_output_tokens=3)
    assert [e.type for e in stream][-1] == "response.incomplete"


def test_a_responses_websocket_repeats_in_progress_while_the_prompt_prefills(serve_fake):
    served = serve_fake()
    held = HeldPrefill(served)
    url = served.root.replace("http://", "ws://") + "/v1/responses"
    with connect(url, max_size=None) as ws:
        ws.send(
            json.dumps({"type": "response.create", "model": "fake", "input": LONG, "max_output_tokens": 3})
        )

        def received():
            while True:
                line = ws.recv(timeout=90)
                yield line
                if json.loads(line)["type"] in ("response.completed", "response.incomplete", "error"):
                    return

        lines = held.read(received(), after_the_first(_is_in_progress))
    kinds = [json.loads(line)["type"] for _, line in lines]
    assert kinds.count("response.in_progress") >= 3 and kinds[-1] == "response.incomplete"
    held.assert_alive(lines, _is_in_progress, lambda line: "response.output_text.delta" in line)


@pytest.mark.parametrize("websocket", [False, True], ids=["http", "websocket"])
def test_the_codex_cli_waits_out_a_prefill_longer_than_its_idle_timeout(serve_fake, tmp_path, websocket):
    # Codex gives up on a stream silent for `stream_idle_timeout_ms`; here 4 s, while the first
    # chunk of its opening (~30k byte tokens on the fake engine) is held for 6 s, on any machine.
    codex_bin = npm_client("@openai/codex", CODEX_VERSION, "codex")
    served = serve_fake(script=lambda conversation: "Nothing to change.", engine_kw={"n_ctx": 65536})
    runtime = served.engine.runtime
    decode, held = runtime.decode, []

    def slow_first_prompt(rows):
        if len(rows) >= 256 and not held:  # a prompt chunk: the opening's first
            held.append(len(rows))
            time.sleep(6)
        return decode(rows)

    runtime.decode = slow_first_prompt
    home, work = tmp_path / "codex-home", tmp_path / "work"
    configure_codex(home, served.root, websocket=websocket)
    with (home / "config.toml").open("a") as config:
        config.write("stream_idle_timeout_ms = 4000\n")
    work.mkdir()
    env = {**os.environ, "CODEX_HOME": str(home), "RUST_LOG": "codex_api=debug"}
    done = subprocess.run(
        [str(codex_bin), "exec", "--skip-git-repo-check", "Say whether hello.py needs a change"],
        cwd=work, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert held, "no prompt was prefilled"
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Nothing to change." in done.stdout
    if websocket:
        assert "successfully connected to Responses WebSocket" in done.stderr
