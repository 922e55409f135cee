"""`whiz bench serve --quick` against real servers on the fake engine, and its first-turn rows: a
prefix from disk after a restart, and `whiz exec` from fresh processes (the fake model)."""

import json
import threading
import time

import uvicorn

from whiz.bench.first_turn import FirstTurnPlan
from whiz.bench.serve import main
from whiz.config import ServeSettings
from whiz.engine.fake import fake_engine
from whiz.server.app import create_app

KEYS = {
    "bench", "target", "model", "date", "cold_ttft_ms", "warm_ttft_ms", "interleaved_ttft_ms",
    "shared_prefix_ttft_ms", "decode_tokens_per_s", "roundtrip_ms", "ratios", "prefix",
    "exec_first_token_ms",
}  # fmt: skip
NO_FIRST_TURN = FirstTurnPlan(prefix_tokens=0, exec_=False)


def last_json_line(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_quick_bench_ends_with_one_json_line_of_results(serve_fake, capsys, tmp_path):
    # A prefill of 1 ms a token: the unseen prefix takes about a second, and what a seen one saves
    # stands clear of the stalls a busy machine gives one turn (200-700 ms beside the suite's other
    # workers; at 0.1 ms a token a seen prefix once read 233 ms against the unseen one's 117).
    served = serve_fake(engine_kw={"token_s": 0.001})
    # A raw baseline that cannot run is noted, and the measured results survive it.
    missing = str(tmp_path / "missing.gguf")
    assert main(served.root, None, None, quick=True, raw_baseline=missing, first_turn=NO_FIRST_TURN) == 0
    result = last_json_line(capsys.readouterr().out)
    assert set(result) >= KEYS
    assert result["bench"] == "serve" and result["model"] == "fake" and result["websocket"] is True
    assert set(result["warm_ttft_ms"]["ws"]) == {"0", "256", "512"} == set(result["warm_ttft_ms"]["http"])
    assert all(v > 0 for v in result["warm_ttft_ms"]["ws"].values())
    # Claude Code's API, the same histories, timed by the server like the others
    assert set(result["warm_ttft_ms"]["anthropic"]) == {"0", "256", "512"}
    assert all(v > 0 for v in result["warm_ttft_ms"]["anthropic"].values())
    assert result["ratios"]["anthropic_over_http_warm512"] > 0
    assert result["interleaved_ttft_ms"] > 0 and result["decode_tokens_per_s"] > 0
    assert result["roundtrip_ms"]["ws"] > 0 and result["roundtrip_ms"]["http"] > 0
    # The fake engine prefills at a fixed cost per token, so a seen prefix must be cheaper.
    first, second = result["shared_prefix_ttft_ms"]["first"], result["shared_prefix_ttft_ms"]["second"]
    assert second < first, (first, second)
    assert "interleaved_over_warm0" in result["ratios"]
    assert any(note.startswith("raw baseline skipped") for note in result["notes"])
    assert result["prefix"] is None and result["exec_first_token_ms"] is None  # not asked for


def test_first_turn_rows_time_a_prefix_from_disk_and_exec_from_fresh_processes(serve_fake, capsys):
    served = serve_fake(engine_kw={"token_s": 0.001})
    assert main(served.root, None, None, quick=True, first_turn=FirstTurnPlan.make(quick=True)) == 0
    out = capsys.readouterr().out
    result = last_json_line(out)
    prefix = result["prefix"]
    assert prefix["tokens"] == 1500 and prefix["identical"] is True
    # Restored after the restart, from memory before it: what the rows time is the prefix not
    # prefilled again (counted, not timed: a busy machine stalls a restore longer than this fake's
    # whole cold prefill).
    assert prefix["cold_cached_tokens"] == 0
    assert prefix["disk_cached_tokens"] >= 1400 and prefix["memory_cached_tokens"] >= 1400, prefix
    first = result["exec_first_token_ms"]
    assert set(first) == {"in_process", "background_cold", "background_warm", "background_same_task"}
    assert all(ms > 0 for ms in first.values()), result["notes"]
    # The first command waited for the server it started; the next found it running.
    assert first["background_warm"] < first["background_cold"]
    assert all(ms >= first[name] for name, ms in result["exec_done_ms"].items())
    assert "exec first token, warm server" in out and "TTFT 1.5k prefix, disk, restarted" in out


def like_a_plain_openai_server(app):
    """The same server with its WebSocket route and Anthropic's API refused, like a plain
    OpenAI-compatible server."""

    async def wrapped(scope, receive, send):
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] == "http" and scope["path"].startswith("/v1/messages"):
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"Not Found"})
            return
        await app(scope, receive, send)

    return wrapped


def test_quick_bench_skips_websocket_and_anthropic_rows_on_a_server_without_them(capsys):
    engine = fake_engine()
    app = like_a_plain_openai_server(create_app(engine, ServeSettings(model="fake", temperature=0)))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="websockets-sansio")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        assert main(f"http://127.0.0.1:{port}/v1", "fake", None, quick=True, first_turn=NO_FIRST_TURN) == 0
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        engine.close()
    out = capsys.readouterr().out
    result = last_json_line(out)
    assert result["websocket"] is False
    assert result["warm_ttft_ms"]["ws"] == {"0": None, "256": None, "512": None}
    assert all(v > 0 for v in result["warm_ttft_ms"]["http"].values())
    assert result["interleaved_ttft_ms"] is None and result["cold_ttft_ms"] > 0
    assert "server has no WebSocket mode" in out
    assert set(result["warm_ttft_ms"]["anthropic"].values()) == {None}
    assert "server has no Anthropic Messages API" in out


def test_an_unreachable_target_fails_with_one_line(capsys):
    assert main("http://127.0.0.1:9", "fake", None, quick=True) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("whiz bench serve: cannot reach http://127.0.0.1:9/v1/")
