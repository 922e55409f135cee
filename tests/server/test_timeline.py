"""`whiz: {"timeline": true}`: a response's decode steps, for the web app's speed plot."""

from __future__ import annotations

import json

from starlette.testclient import TestClient

from whiz.config import ServeSettings
from whiz.engine.fake import fake_engine
from whiz.server.app import create_app
from whiz.server.responses import timeline

REPEATED = "def add(a, b):\n    return a + b\n" * 20


def repeat_script(conversation: str) -> str:
    # Repeats text from the prompt, so prompt lookup drafts it and most steps verify several tokens.
    return REPEATED


def run(client: TestClient, **body) -> dict:
    with client.websocket_connect("ws://127.0.0.1/v1/responses") as ws:
        ws.send_text(json.dumps({"type": "response.create", "model": "fake", "input": REPEATED, **body}))
        while True:
            ev = json.loads(ws.receive_text())
            if ev["type"] in ("response.completed", "response.incomplete", "error"):
                return ev


def test_timeline_splits_decoded_and_accepted_draft_tokens():
    engine = fake_engine(repeat_script)
    try:
        with TestClient(create_app(engine, ServeSettings(model="fake", temperature=0))) as client:
            done = run(client, whiz={"timeline": True})["response"]
            plain = run(client)["response"]
    finally:
        engine.close()
    whiz = done["whiz"]
    rows = whiz["timeline"]
    assert sum(tokens for _, tokens, _ in rows) == done["usage"]["output_tokens"]
    accepted = sum(a for _, _, a in rows)
    assert 0 < accepted <= whiz["draft_accepted"]
    assert any(a > 0 for _, _, a in rows) and any(a == 0 for _, _, a in rows)
    times = [t for t, _, _ in rows]
    assert times == sorted(times) and times[0] >= whiz["ttft_ms"] * 0.5
    # Off unless asked for: other clients get the same `whiz` object as before.
    assert "timeline" not in plain["whiz"]
    assert set(plain["whiz"]) == set(whiz) - {"timeline"}


def test_long_timelines_are_merged_without_losing_tokens():
    steps = [(float(i), 1 + (i % 3)) for i in range(1000)]
    rows = timeline(steps, max_rows=240)
    assert len(rows) <= 240
    assert sum(r[1] for r in rows) == sum(n for _, n in steps)
    assert sum(r[2] for r in rows) == sum(n - 1 for _, n in steps)
    assert rows[-1][0] == 999.0
    assert timeline([]) == []
