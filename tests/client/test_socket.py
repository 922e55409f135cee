import asyncio

import pytest

from whiz.client import (
    ConnectError,
    PreviousResponseNotFound,
    ResponseError,
    ResponsesSocket,
    WebSocketUnsupported,
    user_message,
)

from .fake_server import FakeResponsesServer


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_events_arrive_in_order_and_iteration_ends_at_the_terminal_event():
    server = FakeResponsesServer()

    async def scenario():
        async with server.running() as url, ResponsesSocket.connect(url) as sock:
            events = [e async for e in sock.create(model="m", input="one two three")]
            return events, sock.last

    events, turn = run(scenario())
    types = [e["type"] for e in events]
    assert types == ["response.created", "response.in_progress"] + ["response.output_text.delta"] * 3 + [
        "response.completed"
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert turn.id == "resp_1" and turn.status == "completed"
    assert turn.text == "one two three "
    assert turn.ttft_ms == 1.5 and turn.ttft_source == "server"


def test_a_follow_up_sends_only_new_items_with_the_previous_id_and_warmup_flag():
    server = FakeResponsesServer()

    async def scenario():
        async with server.running() as url, ResponsesSocket.connect(url) as sock:
            warm = await sock.run(model="m", input="system prompt", generate=False)
            turn = await sock.run(model="m", input=[user_message("hi there")], previous_response_id=warm.id)
            return warm, turn

    warm, turn = run(scenario())
    assert warm.text == "" and warm.id == "resp_1"
    assert turn.text == "hi there "
    first, second = server.received
    assert first["type"] == "response.create" and first["generate"] is False
    assert second["previous_response_id"] == "resp_1" and "generate" not in second
    assert second["input"] == [{"type": "message", "role": "user", "content": "hi there"}]


def test_an_error_event_raises_response_error_with_its_code_and_the_socket_stays_usable():
    server = FakeResponsesServer()

    async def scenario():
        async with server.running() as url, ResponsesSocket.connect(url) as sock:
            with pytest.raises(ResponseError) as caught:
                await sock.run(model="m", input="bad")
            with pytest.raises(PreviousResponseNotFound):
                await sock.run(model="m", input="x", previous_response_id="resp_stale")
            return caught.value, await sock.run(model="m", input="still here")

    error, turn = run(scenario())
    assert (error.code, error.param, error.status, error.message) == ("invalid_value", "input", 400, "no")
    assert turn.text == "still here "


def test_cancel_stops_the_running_response():
    server = FakeResponsesServer()

    async def scenario():
        async with server.running() as url, ResponsesSocket.connect(url) as sock:
            deltas = 0
            async for event in sock.create(model="m", input="a " * 50, delay_s=0.01):
                if event["type"] == "response.output_text.delta":
                    deltas += 1
                    if deltas == 2:
                        await sock.cancel()
            return deltas, sock.last

    deltas, turn = run(scenario())
    assert turn.status == "cancelled" and deltas < 50
    assert {"type": "response.cancel"} in server.received


def test_a_response_abandoned_midway_does_not_leak_into_the_next():
    server = FakeResponsesServer()

    async def scenario():
        async with server.running() as url, ResponsesSocket.connect(url) as sock:
            stream = sock.create(model="m", input="first reply words")
            async for _ in stream:
                break
            await stream.aclose()
            return await sock.run(model="m", input="second")

    assert run(scenario()).text == "second "


def test_the_api_key_is_sent_as_a_bearer_token():
    server = FakeResponsesServer()

    async def scenario():
        async with server.running() as url, ResponsesSocket.connect(url + "/v1", api_key="sk-test") as sock:
            await sock.run(model="m", input="x")

    run(scenario())
    assert server.headers[0].get("Authorization") == "Bearer sk-test"


def test_a_refused_connection_names_the_url_in_one_line():
    async def scenario():
        # A port that was free a moment ago, so nothing listens on it.
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        await ResponsesSocket.open(f"http://127.0.0.1:{port}")

    with pytest.raises(ConnectError) as caught:
        run(scenario())
    message = str(caught.value)
    assert "ws://127.0.0.1:" in message and "/v1/responses" in message and "refused" in message
    assert "\n" not in message


def test_a_server_without_websocket_mode_is_reported_as_such():
    server = FakeResponsesServer(websocket=False)

    async def scenario():
        async with server.running() as url:
            await ResponsesSocket.open(url)

    with pytest.raises(WebSocketUnsupported, match="HTTP 404"):
        run(scenario())
