"""The client against a real whiz server on the fake engine (which echoes the last user message)."""

import asyncio

import pytest

from whiz.client import ConnectError, HttpClient, PreviousResponseNotFound, ResponsesSocket, user_message


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_a_warm_up_then_a_chained_turn_streams_the_reply(serve_fake):
    served = serve_fake()

    async def scenario():
        async with ResponsesSocket.connect(served.base_url) as sock:
            warm = await sock.run(
                model="fake", instructions="be brief", input=[user_message("hi")], generate=False
            )
            events = [
                e
                async for e in sock.create(
                    model="fake",
                    input=[user_message("ping")],
                    previous_response_id=warm.id,
                    max_output_tokens=32,
                )
            ]
            return warm, events, sock.last

    warm, events, turn = run(scenario())
    assert warm.status == "completed" and warm.text == ""
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    assert [e["sequence_number"] for e in events] == sorted(e["sequence_number"] for e in events)
    assert turn.text == "echo: ping"
    assert turn.cached_tokens and turn.cached_tokens > 0  # the warm-up's tokens were reused
    assert {"ttft_ms", "prefill_ms", "tokens_per_s"} <= set(turn.whiz)


def test_a_stale_previous_response_raises_previous_response_not_found(serve_fake):
    served = serve_fake()

    async def scenario():
        async with ResponsesSocket.connect(served.root) as sock:
            await sock.run(model="fake", input="a", previous_response_id="resp_nope")

    with pytest.raises(PreviousResponseNotFound) as caught:
        run(scenario())
    assert caught.value.param == "previous_response_id"


def test_the_http_client_streams_chat_with_usage_and_timings(serve_fake):
    served = serve_fake()

    async def scenario():
        async with HttpClient(served.root) as http:
            models = await http.models()
            turn = await http.chat_turn({"model": "fake", "messages": [{"role": "user", "content": "yo"}]})
            return models, turn

    models, turn = run(scenario())
    assert models == ["fake"]
    assert turn.text == "echo: yo"
    assert turn.input_tokens and turn.output_tokens == len("echo: yo")
    assert turn.ttft_source == "server"


def test_the_http_client_names_an_unreachable_server():
    async def scenario():
        async with HttpClient("http://127.0.0.1:9") as http:
            await http.models()

    with pytest.raises(ConnectError, match=r"http://127\.0\.0\.1:9/v1/models.*refused"):
        run(scenario())
