"""WhizModel over WebSocket mode, against a server on the fake engine."""

from __future__ import annotations

import asyncio

from tests.agent.test_control import wait_until
from whiz.agent.models.seam import Finished, ModelRequest, ModelText, ModelToolCall
from whiz.agent.models.whiz_model import WhizModel
from whiz.client import ResponsesSocket
from whiz.engine.fake import last_user_message


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": text}


async def collect(model: WhizModel, request: ModelRequest) -> tuple[str, list[ModelToolCall], Finished]:
    text, calls, finished = "", [], None
    async for event in model.respond(request):
        if isinstance(event, ModelText):
            text += event.text
        elif isinstance(event, ModelToolCall):
            calls.append(event)
        else:
            finished = event
    assert finished is not None
    return text, calls, finished


def memory_script(conversation: str) -> str:
    """Answers with every user message so far, so a test sees what the model was given."""
    return "seen: " + last_user_message(conversation) + (" +A" if "first question" in conversation else "")


def spied_on(model: WhizModel) -> list[dict]:
    """The bodies the model's socket sends from now on, in order."""
    sent: list[dict] = []
    create = model.socket.create

    def spy(**body):
        sent.append(body)
        return create(**body)

    model.socket.create = spy
    return sent


async def test_later_calls_send_only_new_items_and_reuse_the_cache(serve_fake) -> None:
    server = serve_fake(script=memory_script)
    model = await WhizModel.open(server.root)
    sent = spied_on(model)
    try:
        items = [user("first question")]
        text, _, first = await collect(model, ModelRequest("be brief", items))
        assert text == "seen: first question +A"
        first_id = model.socket.last.response["id"]
        items += first.output_items + [user("second")]
        text, _, second = await collect(model, ModelRequest("be brief", items))
        assert text == "seen: second +A"  # the server still had the first turn
        # The second request names the first response and carries only the new user message.
        assert "previous_response_id" not in sent[0]
        assert sent[1]["previous_response_id"] == first_id
        assert sent[1]["input"] == [user("second")]
        assert second.usage["input_tokens_details"]["cached_tokens"] > 0
        assert second.usage["input_tokens"] - second.usage["input_tokens_details"]["cached_tokens"] < 100
    finally:
        await model.close()


async def test_a_forgotten_conversation_is_sent_again_in_full(serve_fake) -> None:
    server = serve_fake(script=memory_script)
    model = await WhizModel.open(server.root)
    items = [user("first question")]
    _, _, first = await collect(model, ModelRequest("be brief", items))
    # A new connection does not hold the old one's response: the server answers
    # previous_response_not_found, and the model resends everything.
    await model.socket.close()
    model.socket = await ResponsesSocket.open(server.root)
    try:
        items += first.output_items + [user("second")]
        text, _, finished = await collect(model, ModelRequest("be brief", items))
        assert finished.status == "completed"
        assert text == "seen: second +A"
        assert model.socket.last.response["previous_response_id"] is None
    finally:
        await model.close()


async def test_tool_calls_arrive_as_events_and_output_items(serve_fake) -> None:
    call = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>'
    server = serve_fake(script=lambda conv: call)
    model = await WhizModel.open(server.root)
    tools = [{"type": "function", "name": "read_file", "parameters": {"type": "object", "properties": {}}}]
    try:
        _, calls, finished = await collect(model, ModelRequest("use tools", [user("read a.py")], tools=tools))
    finally:
        await model.close()
    assert [(c.name, c.arguments) for c in calls] == [("read_file", '{"path": "a.py"}')]
    assert finished.output_items[-1]["type"] == "function_call"
    assert finished.output_items[-1]["call_id"] == calls[0].call_id


async def test_a_prediction_is_drafted_from(serve_fake) -> None:
    reply = "def completely_new_function(argument):\n    return argument * 42\n"
    server = serve_fake(script=lambda conv: reply)
    model = await WhizModel.open(server.root)
    try:
        text, _, finished = await collect(model, ModelRequest("x", [user("write it")], prediction=reply))
    finally:
        await model.close()
    assert text == reply
    assert finished.timings["draft_accepted"] > 0


async def test_cancel_stops_the_server_and_the_conversation_goes_on(serve_fake) -> None:
    long_reply = "".join(f"line {i} of a long answer\n" for i in range(400))
    server = serve_fake(script=lambda conv: long_reply, engine_kw={"step_s": 0.02})
    model = await WhizModel.open(server.root)
    try:
        text, finished = "", None
        async for event in model.respond(ModelRequest("x", [user("go")])):
            if isinstance(event, ModelText):
                text += event.text
                if len(text) == len(event.text):
                    await model.cancel()
            elif isinstance(event, Finished):
                finished = event
        assert finished is not None and finished.status == "cancelled"
        assert len(text) < len(long_reply)
        # The engine stopped: what it decoded in all is far from the 10k-token reply.
        runtime = server.engine.runtime
        decoded_at_end = runtime.decoded_tokens
        await wait_until(lambda: server.engine.status()["active"] == 0)
        assert decoded_at_end <= runtime.decoded_tokens < len(long_reply) / 4
        # A cancelled response cannot be continued: the server says so, and the next call sends
        # the whole conversation again.
        items = [user("go")] + finished.output_items + [user("again")]
        _, _, again = await asyncio.wait_for(
            collect(model, ModelRequest("x", items, max_output_tokens=5)), 30
        )
        assert again.status in ("completed", "incomplete")
        assert model.socket.last.response["previous_response_id"] is None
    finally:
        await model.close()


async def test_after_a_cancelled_response_the_next_call_chains_from_the_last_completed_one(
    serve_fake,
) -> None:
    # A reply long enough to cancel, after a first turn that completes.
    long_reply = "".join(f"line {i} of a long answer\n" for i in range(400))
    script = lambda conv: memory_script(conv) if "cancel me" not in last_user_message(conv) else long_reply  # noqa: E731
    server = serve_fake(script=script, engine_kw={"step_s": 0.02})
    model = await WhizModel.open(server.root)
    sent = spied_on(model)
    try:
        items = [user("first question")]
        _, _, first = await collect(model, ModelRequest("be brief", items))
        first_id = model.socket.last.response["id"]
        items += first.output_items + [user("cancel me")]
        cancelled = None
        async for event in model.respond(ModelRequest("be brief", items)):
            if isinstance(event, ModelText):
                await model.cancel()
            elif isinstance(event, Finished):
                cancelled = event
        assert cancelled is not None and cancelled.status == "cancelled"
        items += cancelled.output_items + [user("again")]
        text, _, again = await asyncio.wait_for(collect(model, ModelRequest("be brief", items)), 30)
        assert again.status == "completed" and text == "seen: again +A"  # the first turn is still held
        # The third call names the first (completed) response and sends only what came after it:
        # the message whose reply was cancelled, the reply's words as far as they got, and the new
        # message.
        assert sent[2]["previous_response_id"] == first_id
        assert sent[2]["input"] == [user("cancel me"), *cancelled.output_items, user("again")]
        assert model.socket.last.response["previous_response_id"] == first_id
    finally:
        await model.close()
