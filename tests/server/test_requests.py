"""What every API reads alike: the same bound on stop sequences, named the same way, and the session
a request names, whichever header names it."""

from __future__ import annotations

import httpx
import pytest

from tests.server.test_completions import llama_vim_body
from whiz.server.requests import session_header

LONG_STOP = "x" * 65


def bodies(stops: list[str]) -> dict[str, dict]:
    """One request per API, each with `stops` as its stop sequences."""
    return {
        "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "stop": stops},
        "/v1/completions": {"prompt": "def f():", "stop": stops},
        "/infill": llama_vim_body(stop=stops),
        "/v1/messages": {
            "model": "fake",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
            "stop_sequences": stops,
        },
    }


@pytest.mark.parametrize("stops", [[LONG_STOP], ["a", LONG_STOP]], ids=["alone", "second"])
def test_a_stop_sequence_too_long_is_refused_by_every_api_naming_the_field(serve_fake, stops):
    served = serve_fake()
    for path, body in bodies(stops).items():
        answer = httpx.post(served.root + path, json=body, timeout=30)
        assert answer.status_code == 400, (path, answer.text)
        error = answer.json()["error"]
        assert "64 characters" in error["message"], (path, error)
        assert "stop" in error["message"], (path, error)


def test_more_stop_sequences_than_an_api_takes_are_refused(serve_fake):
    served = serve_fake()
    for path, body in bodies(["s1", "s2", "s3", "s4", "s5"]).items():
        answer = httpx.post(served.root + path, json=body, timeout=30)
        if path == "/v1/messages":  # Anthropic's API takes up to 8
            assert answer.status_code == 200, answer.text
            continue
        assert answer.status_code == 400, (path, answer.text)
        assert "at most 4 stop sequences" in answer.json()["error"]["message"], path


def test_stops_within_the_bounds_are_taken(serve_fake):
    served = serve_fake()
    for path, body in bodies(["\n\n", "x" * 64]).items():
        answer = httpx.post(served.root + path, json=body, timeout=30)
        if path == "/infill":  # the fake chat model has no FIM tokens: refused for that, not the stops
            assert answer.json()["error"]["code"] == "fim_unsupported", answer.text
            continue
        assert answer.status_code == 200, (path, answer.text)


@pytest.mark.parametrize("header", ["x-session-id", "session_id", "session-id", "x-claude-code-session-id"])
def test_each_clients_session_header_names_the_session(header):
    assert session_header({header: "abc"}) == "abc"
    assert session_header({"x-other": "abc"}) is None
    assert session_header({header: ""}) is None
