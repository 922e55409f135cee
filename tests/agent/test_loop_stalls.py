"""`ToolStall` in a turn: tool calls that stop making progress end it with the best answer there is,
a `tool_stall` item says why, and the conversation stays whole for the next turn."""

from __future__ import annotations

from typing import Any

from whiz.agent.external import ExternalTool, ToolResult
from whiz.agent.models.scripted_model import Reply

TASK = "Use the everything__echo tool to echo the message: hello from whiz. Then tell me what it returned."
ECHO = ("everything__echo", {"message": "hello from whiz"})
ANNOTATED = ("everything__get-annotated-message", {"messageType": "success", "includeImage": False})
WEATHER = ("everything__get-structured-content", {"location": "New York"})


class FakeServer:
    """`ExternalTools` of a few read-only tools that answer at once; it records every call made."""

    def __init__(self) -> None:
        names = ["echo", "get-annotated-message", "get-structured-content"]
        schema = {"type": "object", "properties": {}}
        self.offered = [
            ExternalTool(f"everything__{n}", n, schema, True, "MCP server everything") for n in names
        ]
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def tools(self) -> list[ExternalTool]:
        return self.offered

    def invalid(self, tool: ExternalTool, arguments: dict[str, Any]) -> str | None:
        return None

    async def call(self, tool: ExternalTool, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append((tool.name, arguments))
        if tool.name == "everything__echo":
            return ToolResult(f"Echo: {arguments.get('message')}")
        return ToolResult(f"{tool.name} says something unrelated")

    async def close(self) -> None:
        pass


def with_server(harness, replies: list, **config):
    h = harness(replies, **config)
    h.server = FakeServer()
    h.agent.tools.external = h.server
    return h


async def test_calls_after_the_named_tool_answered_end_the_turn_with_the_echo(harness):
    replies = [Reply(calls=[ECHO]), Reply(calls=[ANNOTATED]), "It returned: Echo: hello from whiz"]
    h = with_server(harness, replies, actions="tools")
    result = await h.agent.run(TASK)
    assert result.ok, result.message
    assert result.message == "It returned: Echo: hello from whiz"
    assert h.server.calls == [ECHO]  # the unrelated tool never ran
    [stall] = h.events.items("tool_stall")
    assert stall["tool"] == "everything__get-annotated-message" and stall["answered_from"] == [
        "everything__echo"
    ]
    assert "uses nothing the task or a result gave" in stall["reason"]
    last = h.model.requests[-1]
    told = last.items[-1]
    assert told["role"] == "user" and "No more tools will be called" in told["content"]
    assert "everything__echo returned:\nEcho: hello from whiz" in told["content"]
    assert {t["name"] for t in last.tools} == {
        t["name"] for t in h.model.requests[1].tools
    }  # the same prefix
    not_called = [i for i in last.items if i.get("type") == "function_call_output"][-1]
    assert not_called["output"].startswith("Not called: everything__get-annotated-message was not called")


async def test_words_that_leave_the_result_out_get_it_added_and_shown(harness):
    replies = [Reply(calls=[ECHO]), Reply(calls=[WEATHER]), "Done, it worked."]
    h = with_server(harness, replies, actions="tools")
    result = await h.agent.run(TASK)
    assert result.ok and "Echo: hello from whiz" in result.message
    said = [m["text"] for m in h.events.items("agent_message")]
    assert said == ["Done, it worked.", "everything__echo returned:\nEcho: hello from whiz"]


async def test_a_last_reply_that_calls_a_tool_again_is_answered_with_the_result(harness):
    replies = [Reply(calls=[ECHO]), Reply(calls=[ANNOTATED]), Reply(calls=[WEATHER])]
    h = with_server(harness, replies, actions="tools")
    result = await h.agent.run(TASK)
    assert result.ok and result.message == "everything__echo returned:\nEcho: hello from whiz"
    assert h.server.calls == [ECHO]
    # Every call in the conversation has its output, so the next turn's request is whole.
    calls = [i["call_id"] for i in h.agent.items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in h.agent.items if i.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs) and len(calls) == 3


async def test_a_reply_of_several_calls_stops_at_the_first_that_makes_no_progress(harness):
    replies = [Reply(calls=[ECHO, ANNOTATED, WEATHER]), "Echo: hello from whiz"]
    h = with_server(harness, replies, actions="tools")
    result = await h.agent.run(TASK)
    assert result.ok and h.server.calls == [ECHO]
    outputs = [i["output"] for i in h.model.requests[-1].items if i.get("type") == "function_call_output"]
    assert outputs[0].endswith("Echo: hello from whiz")
    assert all(o.startswith("Not called:") for o in outputs[1:]) and len(outputs) == 3


async def test_text_actions_end_the_same_way(harness):
    call = 'CALL everything__echo {"message": "hello from whiz"}'
    other = 'CALL everything__get-structured-content {"location": "New York"}'
    h = with_server(harness, [call, other, "It said Echo: hello from whiz"])
    result = await h.agent.run(TASK)
    assert result.ok and result.message == "It said Echo: hello from whiz"
    assert h.server.calls == [ECHO] and len(h.events.items("tool_stall")) == 1
    assert h.model.requests[-1].items[-1]["content"].startswith("No more tools will be called")


async def test_a_last_reply_with_another_call_line_in_text_is_not_taken_as_the_answer(harness):
    call = 'CALL everything__echo {"message": "hello from whiz"}'
    other = 'CALL everything__get-structured-content {"location": "New York"}'
    h = with_server(harness, [call, other, other])
    result = await h.agent.run(TASK)
    assert result.ok and result.message == "everything__echo returned:\nEcho: hello from whiz"
    assert h.server.calls == [ECHO]


async def test_calls_that_never_made_progress_fail_the_turn_saying_why(harness):
    replies = [Reply(calls=[ANNOTATED]), Reply(calls=[WEATHER])]
    h = with_server(harness, replies, actions="tools")
    result = await h.agent.run("Tidy up my notes")
    assert not result.ok
    assert result.message.startswith("the tool calls made no progress toward the task")
    assert h.server.calls == [ANNOTATED] and h.events.items("tool_stall")[0]["answered_from"] == []
    assert len(h.model.requests) == 2  # no last call: there is nothing to answer with


async def test_the_next_turn_judges_its_calls_afresh(harness):
    replies = [
        Reply(calls=[ECHO]),
        Reply(calls=[ANNOTATED]),
        "Echo: hello from whiz",
        Reply(calls=[ANNOTATED]),
        "ok",
    ]
    h = with_server(harness, replies, actions="tools")
    assert (await h.agent.run(TASK)).ok
    result = await h.agent.run("Now use everything__get-annotated-message")
    assert result.ok and result.message == "ok"
    assert h.server.calls == [ECHO, ANNOTATED] and len(h.events.items("tool_stall")) == 1


class FileServer(FakeServer):
    """One read-only tool, `files__read`, that reads the workspace's files as they are now."""

    def __init__(self, root) -> None:
        super().__init__()
        self.root = root
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        self.offered = [ExternalTool("files__read", "read", schema, True, "MCP server files")]

    async def call(self, tool: ExternalTool, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append((tool.name, arguments))
        return ToolResult((self.root / arguments["path"]).read_text())


async def test_a_read_only_tool_called_again_after_an_edit_reads_the_file_as_it_is_now(harness):
    read = ("files__read", {"path": "greet.py"})
    edit = (
        "edit_file",
        {"path": "greet.py", "old_text": "def say_hello(name):", "new_text": "def greet(name):"},
    )
    replies = [Reply(calls=[read]), Reply(calls=[edit, read]), "Renamed; it now starts with def greet."]
    h = harness(replies, actions="tools")
    h.server = FileServer(h.agent.ws.root)
    h.agent.tools.external = h.server
    result = await h.agent.run("Use files__read on greet.py, rename say_hello to greet, then read it again")
    assert result.ok, result.message
    assert h.server.calls == [read, read]  # called again: the edit changed the file
    last = [i for i in h.agent.items if i.get("type") == "function_call_output"][-1]
    assert "def greet(name):" in last["output"] and h.events.items("tool_stall") == []
