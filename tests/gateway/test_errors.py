"""Bad upstream answers become clear errors for the client, and the gateway goes on serving."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import free_port
from whiz.client import ClientError, HttpClient, ResponsesSocket, user_message

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("mode", "status", "code", "says"),
    [
        ("error", 502, "upstream_error", "fake upstream exploded"),
        ("bad_request", 400, "context_length_exceeded", "maximum context length"),
        ("unauthorized", 502, "upstream_auth_failed", "--upstream-key"),
        ("malformed", 502, "upstream_protocol_error", "is not JSON"),
        ("not_sse", 502, "upstream_protocol_error", "not server-sent events"),
        ("no_choices", 502, "upstream_protocol_error", "without choices"),
        ("hang", 504, "upstream_timeout", "sent nothing for 0.5 s"),
    ],
)
async def test_a_bad_upstream_answer_is_a_clear_error_and_the_gateway_goes_on(
    upstreams, gateway, mode, status, code, says
):
    up = upstreams()
    # Only the hung upstream waits for the gateway's timeout; the others answer at once, however
    # busy the machine, and must be judged by what they said, not by a timeout that fired first.
    gw = gateway([up.url], upstream_timeout_s=0.5 if mode == "hang" else 5.0)
    up.fake.mode = mode
    async with httpx.AsyncClient(base_url=gw.base_url, timeout=10) as client:
        # A hung upstream is given up on by the gateway's own timeout (the answer says so), long
        # before this client's, which would fail the test instead.
        answer = await client.post("/chat/completions", json=CHAT)
        assert answer.status_code == status
        error = answer.json()["error"]
        assert error["code"] == code and says in error["message"]
        if status >= 500:
            assert up.url in error["message"]  # which replica failed
        up.fake.mode = "ok"
        again = await client.post("/chat/completions", json=CHAT)
    assert again.status_code == 200 and again.json()["choices"][0]["message"]["content"] == "echo: hi"


async def test_a_streamed_chat_that_goes_bad_mid_stream_ends_with_an_error_chunk(upstreams, gateway):
    up = upstreams()
    gw = gateway([up.url])
    up.fake.mode = "die_mid"
    async with HttpClient(gw.root) as client:
        with pytest.raises(ClientError) as caught:
            await client.chat_turn({**CHAT, "messages": [{"role": "user", "content": "a longer question"}]})
    assert caught.value.code == "upstream_lost"
    assert "send the turn again" in caught.value.message


async def test_a_stream_that_hangs_midway_fails_the_turn_and_the_session_goes_on(upstreams, gateway):
    up = upstreams()
    # Long enough that a busy machine's answered turns come in time; the hang still ends in it.
    gw = gateway([up.url], upstream_timeout_s=2.0)
    async with ResponsesSocket.connect(gw.root) as sock:
        first = await sock.run(model="m", input="first question")
        up.fake.mode = "hang_mid"
        async for _ in sock.create(model="m", input=[user_message("second")], previous_response_id=first.id):
            pass
        failed = sock.last.response
        assert failed["status"] == "failed"
        assert failed["error"]["code"] == "upstream_lost" and "sent nothing" in failed["error"]["message"]
        # The failed turn left the conversation as it was: the same turn, sent again, goes through.
        up.fake.mode = "ok"
        retry = await sock.run(model="m", input=[user_message("second")], previous_response_id=first.id)
    assert retry.text == "echo: second"
    assert [m["content"] for m in up.fake.bodies[-1]["messages"]] == [
        "first question",
        "echo: first question",
        "second",
    ]


async def test_websocket_errors_from_the_upstream_keep_the_connection(upstreams, gateway):
    up = upstreams()
    gw = gateway([up.url])
    async with ResponsesSocket.connect(gw.root) as sock:
        up.fake.mode = "error"
        async for _ in sock.create(model="m", input="x"):
            pass
        assert sock.last.response["status"] == "failed"
        assert sock.last.response["error"]["code"] == "upstream_error"
        up.fake.mode = "ok"
        turn = await sock.run(model="m", input="y")
    assert turn.text == "echo: y"


async def test_an_unreachable_upstream_is_a_503_that_names_it(gateway):
    dead = f"http://127.0.0.1:{free_port()}"
    gw = gateway([dead])
    async with httpx.AsyncClient(base_url=gw.root, timeout=10) as client:
        answer = await client.post("/v1/chat/completions", json=CHAT)
        assert answer.status_code == 503
        error = answer.json()["error"]
        assert error["code"] == "upstream_unavailable" and dead in error["message"]
        assert (await client.get("/health")).status_code == 200
        metrics = (await client.get("/metrics")).text
    assert f'whiz_replica_healthy{{replica="{dead}"}} 0' in metrics


async def test_a_non_streamed_responses_request_gets_the_upstream_error_status(upstreams, gateway):
    up = upstreams()
    gw = gateway([up.url])
    up.fake.mode = "bad_request"
    async with httpx.AsyncClient(base_url=gw.base_url, timeout=10) as client:
        answer = await client.post("/responses", json={"input": "too long"})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "context_length_exceeded"
