"""The Responses WebSocket mode through the openai SDK's `responses.connect()`."""

import json
import time

from .test_chat import weather_script
from .test_responses_http import WEATHER_TOOL, count_turns

TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")
LONG_REPLY = "x" * 3000


def long_or_count(conversation: str) -> str:
    """A reply of 3000 tokens to "long" (slow with step_s); otherwise the number of user turns."""
    return LONG_REPLY if conversation.endswith("user\nlong<|im_end|>\n") else count_turns(conversation)


def until_done(conn) -> list:
    """The events of one response, through its terminal event (or an error event)."""
    events = []
    for ev in conn:
        events.append(ev)
        if ev.type in TERMINAL:
            return events
    raise AssertionError(f"socket closed after {[e.type for e in events]}")


def text_of(events) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


def wait_for(predicate, timeout_s: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_two_turns_chained_send_only_the_new_message(serve_fake, sdk):
    client = sdk(serve_fake(script=count_turns))
    with client.responses.connect() as conn:
        # Codex sends fields a local server has no use for; they are ignored.
        conn.response.create(
            model="fake",
            input="one",
            instructions="Count.",
            stream=True,
            store=False,
            include=["reasoning.encrypted_content"],
            prompt_cache_key="k",
        )
        first = until_done(conn)
        types = [e.type for e in first]
        assert types[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
        assert types[-2:] == ["response.output_item.done", "response.completed"]
        assert text_of(first) == "turns=1 last=one<|im_end|>"
        rid = first[-1].response.id

        conn.response.create(
            model="fake", previous_response_id=rid, input=[{"role": "user", "content": "two"}]
        )
        second = until_done(conn)
        done = second[-1].response
        assert done.status == "completed"
        assert done.output_text == text_of(second) == "turns=2 last=two<|im_end|>"
        assert done.usage.input_tokens_details.cached_tokens >= first[-1].response.usage.input_tokens
        assert done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens
        assert "ttft_ms" in done.model_extra["whiz"]
        seqs = [e.sequence_number for e in first + second]
        assert seqs == sorted(set(seqs))


def test_warm_up_then_chained_turn(serve_fake, sdk):
    client = sdk(serve_fake(script=count_turns))
    with client.responses.connect() as conn:
        conn.response.create(
            model="fake",
            generate=False,
            tools=[WEATHER_TOOL],
            input=[
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "Agent. " * 30}],
                }
            ],
        )
        warm = until_done(conn)
        assert [e.type for e in warm] == ["response.created", "response.in_progress", "response.completed"]
        warm_resp = warm[-1].response
        assert warm_resp.output == [] and warm_resp.usage.output_tokens == 0
        assert warm_resp.usage.input_tokens > 200

        conn.response.create(
            model="fake", previous_response_id=warm_resp.id, tools=[WEATHER_TOOL], input="hi"
        )
        turn = until_done(conn)[-1].response
        assert turn.output_text == "turns=1 last=hi<|im_end|>"
        assert turn.usage.input_tokens_details.cached_tokens >= warm_resp.usage.input_tokens


def test_tool_call_and_output_over_the_socket(serve_fake, sdk):
    client = sdk(serve_fake(script=weather_script))
    with client.responses.connect() as conn:
        conn.response.create(model="fake", input="Weather?", tools=[WEATHER_TOOL])
        events = until_done(conn)
        [call] = [e.item for e in events if e.type == "response.output_item.done"]
        assert call.type == "function_call" and call.name == "get_weather"
        assert json.loads(call.arguments) == {"city": "Paris"}
        conn.response.create(
            model="fake",
            previous_response_id=events[-1].response.id,
            tools=[WEATHER_TOOL],
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "cloudy"}],
        )
        assert until_done(conn)[-1].response.output_text == "The weather: cloudy"


def test_cancel_mid_generation_keeps_the_session(serve_fake, sdk):
    served = serve_fake(script=long_or_count, engine_kw={"step_s": 0.005})
    client = sdk(served)
    with client.responses.connect() as conn:
        conn.response.create(model="fake", input="long")
        events = []
        for ev in conn:
            events.append(ev)
            if ev.type == "response.output_text.delta" and len(events) == 10:
                conn.send({"type": "response.cancel"})
            if ev.type in TERMINAL:
                break
        # What the engine had decoded when the turn ended, and once it stopped: far from the
        # 3000-token reply (the prompt is a few dozen tokens).
        decoded_at_end = served.engine.runtime.decoded_tokens
        assert wait_for(lambda: served.engine.status()["active"] == 0, timeout_s=30)
        last = events[-1]
        assert last.type == "response.incomplete"
        assert last.response.status == "cancelled"
        assert last.response.incomplete_details.reason == "cancelled"
        partial = text_of(events)
        assert 0 < len(partial) < len(LONG_REPLY) / 2
        assert last.response.usage.output_tokens >= len(partial)
        assert decoded_at_end <= served.engine.runtime.decoded_tokens < len(LONG_REPLY) / 2
        assert "response.output_item.done" in [e.type for e in events]

        # The session goes on. A cancelled response cannot be continued (the error says so), so
        # the client sends its input again.
        conn.response.create(model="fake", previous_response_id=last.response.id, input="next")
        [err] = until_done(conn)
        assert err.type == "error" and "cancelled" in err.error.message
        conn.response.create(model="fake", input="next")
        after = until_done(conn)[-1].response
        assert after.status == "completed"
        assert after.output_text.startswith("turns=1 last=next")


def test_closing_the_socket_stops_the_engine(serve_fake, sdk):
    served = serve_fake(script=long_or_count, engine_kw={"step_s": 0.005})
    client = sdk(served)
    with client.responses.connect() as conn:
        conn.response.create(model="fake", input="long")
        n = 0
        for ev in conn:
            n += ev.type == "response.output_text.delta"
            if n == 5:
                break
        assert served.engine.status()["active"] == 1
    assert wait_for(lambda: served.engine.status()["active"] == 0, 2.0)
    # The server still serves new connections.
    with client.responses.connect() as conn:
        conn.response.create(model="fake", input="hello")
        assert until_done(conn)[-1].response.status == "completed"


def test_queued_creates_run_one_after_the_other(serve_fake, sdk):
    client = sdk(serve_fake())
    with client.responses.connect() as conn:
        conn.response.create(model="fake", input="first")
        conn.response.create(model="fake", input="second")
        a = until_done(conn)
        b = until_done(conn)
    assert text_of(a) == "echo: first" and a[-1].type == "response.completed"
    assert text_of(b) == "echo: second" and b[-1].type == "response.completed"
    # Nothing of the second response interleaves with the first.
    assert {e.response.id for e in a if hasattr(e, "response")} == {a[-1].response.id}
    assert b[0].type == "response.created" and b[0].response.id != a[-1].response.id


def test_stale_previous_response_id_is_an_error_event(serve_fake, sdk):
    client = sdk(serve_fake(script=count_turns))
    with client.responses.connect() as conn:
        conn.response.create(model="fake", input="one")
        first = until_done(conn)[-1].response
        conn.response.create(model="fake", input="two", previous_response_id=first.id)
        second = until_done(conn)[-1].response

        conn.response.create(model="fake", input="three", previous_response_id=first.id)
        [err] = until_done(conn)
        assert err.type == "error"
        assert err.error.code == "previous_response_not_found"
        assert err.error.param == "previous_response_id"
        assert err.status == 400

        conn.response.create(model="fake", input="three", previous_response_id=second.id)
        assert until_done(conn)[-1].response.output_text.startswith("turns=3")


def test_bad_events_get_error_events_and_the_session_goes_on(serve_fake, sdk):
    client = sdk(serve_fake(engine_kw={"n_ctx": 512}))
    bad = [
        ("{not json", "invalid_json", None),
        (json.dumps({"type": "response.bogus"}), "unknown_event_type", "type"),
        (json.dumps(["response.create"]), "invalid_request", "type"),
        (
            json.dumps({"type": "response.create", "input": "x", "temperature": "hot"}),
            "invalid_request",
            "temperature",
        ),
        (
            json.dumps(
                {"type": "response.create", "input": [{"type": "message", "role": "robot", "content": "x"}]}
            ),
            "invalid_request",
            "input.0.role",
        ),
        (json.dumps({"type": "response.create", "input": "y" * 600}), "context_length_exceeded", "input"),
    ]
    with client.responses.connect() as conn:
        for raw, code, param in bad:
            conn.send_raw(raw)
            [err] = until_done(conn)
            assert err.type == "error", raw
            assert err.error.code == code, raw
            assert err.error.param == param, raw
            assert err.error.message
            conn.response.create(model="fake", input="good")
            ok = until_done(conn)
            assert ok[-1].type == "response.completed", raw
            assert text_of(ok) == "echo: good"


def test_two_connections_run_in_parallel_without_mixing(serve_fake, sdk):
    served = serve_fake(script=long_or_count, engine_kw={"step_s": 0.005})
    client = sdk(served)
    with client.responses.connect() as slow, client.responses.connect() as quick:
        slow.response.create(model="fake", input="long")
        for ev in slow:
            if ev.type == "response.output_text.delta":
                break
        slow_id = ev.item_id

        # A whole conversation on the other socket while the long reply is still streaming.
        quick.response.create(model="fake", input="a")
        one = until_done(quick)[-1].response
        quick.response.create(model="fake", input="b", previous_response_id=one.id)
        two = until_done(quick)[-1].response
        assert (one.output_text, two.output_text) == ("turns=1 last=a<|im_end|>", "turns=2 last=b<|im_end|>")
        assert two.usage.input_tokens_details.cached_tokens > 0
        assert served.engine.status()["active"] == 1  # the slow one is still generating

        slow.send({"type": "response.cancel"})
        rest = until_done(slow)
        assert {e.item_id for e in rest if e.type == "response.output_text.delta"} <= {slow_id}
        assert set(text_of(rest)) <= {"x"}
        assert rest[-1].response.status == "cancelled"
