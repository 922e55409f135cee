"""`ToolStall` over the agent's own tools, in a turn: the same read (or command) again with nothing
changed, or searches nobody uses, end the turn with the best answer there is and a `tool_stall`
item; a re-read after an edit is no repeat."""

from __future__ import annotations

from whiz.agent.models.scripted_model import Reply

from .conftest import sr

READ = ("read_file", {"path": "greet.py"})


async def test_text_reads_of_the_same_file_again_end_the_turn_with_an_answer(harness):
    h = harness(["READ greet.py", "READ greet.py", "READ greet.py", "It greets the world."])
    result = await h.agent.run("What does greet.py print?")
    assert result.ok, result.message
    assert result.message.startswith("It greets the world.") and "Hello" in result.message
    [stall] = h.events.items("tool_stall")
    assert stall["tool"] == "read_file" and stall["arguments"] == {"path": "greet.py"}
    assert "already called with these arguments" in stall["reason"]
    assert len(h.events.items("tool_call")) == 2  # the third read never ran
    assert h.model.requests[-1].items[-1]["content"].startswith("No more tools will be called")


async def test_tool_reads_of_the_same_file_again_end_the_turn_and_every_call_is_answered(harness):
    replies = [Reply(calls=[READ]), Reply(calls=[READ]), Reply(calls=[READ]), "It prints Hello, world"]
    h = harness(replies, actions="tools")
    result = await h.agent.run("What does greet.py print?")
    assert result.ok and result.message.startswith("It prints Hello, world")
    assert "read_file returned:\ngreet.py:" in result.message  # the words quote none of the file
    assert len(h.events.items("tool_stall")) == 1 and len(h.events.items("tool_call")) == 2
    calls = [i["call_id"] for i in h.agent.items if i.get("type") == "function_call"]
    outputs = {i["call_id"]: i["output"] for i in h.agent.items if i.get("type") == "function_call_output"}
    assert sorted(outputs) == sorted(calls) and outputs[calls[-1]].startswith("Not called: read_file")


async def test_a_re_read_after_an_edit_is_not_a_repeat(harness):
    edit = sr("greet.py", "def say_hello(name):", "def greet(name):") + "\nREAD greet.py"
    h = harness(["READ greet.py", "READ greet.py", edit, "READ greet.py", "Renamed it to greet."])
    result = await h.agent.run("In greet.py, rename say_hello to greet, then show me the file")
    assert result.ok and result.message == "Renamed it to greet."
    assert h.events.items("tool_stall") == []
    assert "def greet(name):" in (h.agent.ws.root / "greet.py").read_text()


async def test_searches_whose_results_nobody_uses_fail_the_turn_saying_why(harness):
    h = harness(["GREP zebra", "GREP giraffe", "GREP okapi", "GREP lemur"])
    result = await h.agent.run("Fix the bug")
    assert not result.ok
    assert result.message.startswith("the tool calls made no progress toward the task")
    [stall] = h.events.items("tool_stall")
    assert stall["tool"] == "search_text" and stall["answered_from"] == []
    assert len(h.model.requests) == 2  # nothing to answer with: no last call


async def test_the_same_command_again_with_nothing_changed_ends_the_turn(harness):
    run = ("run_command", {"command": "echo checked"})
    replies = [Reply(calls=[run]), Reply(calls=[run]), Reply(calls=[run]), "It printed checked."]
    h = harness(replies, actions="tools", approval="full-auto")
    result = await h.agent.run("Run the check and tell me what it says")
    assert result.ok and result.message == "It printed checked."
    assert len(h.events.items("command_execution")) == 2 and len(h.events.items("tool_stall")) == 1


async def test_reads_that_follow_what_the_listing_showed_go_on(harness):
    replies = ["LIST", "READ README.md", "READ greet.py", "GREP say_hello", "A tiny project that greets."]
    h = harness(replies)
    result = await h.agent.run("What is this project?")
    assert result.ok and result.message == "A tiny project that greets."
    assert h.events.items("tool_stall") == []


async def test_a_stop_inside_a_text_reply_still_shows_what_its_earlier_actions_returned(harness):
    h = harness(["LIST\nGREP zebra\nGREP okapi", "It holds greet.py and README.md."])
    result = await h.agent.run("What files are there?")
    assert result.ok and result.message == "It holds greet.py and README.md."
    [stall] = h.events.items("tool_stall")
    assert stall["arguments"] == {"text": "okapi", "path": "."}
    told = [i["content"] for i in h.model.requests[-1].items if i.get("role") == "user"]
    assert "greet.py" in told[-2] and "No matches for 'zebra'" in told[-2]  # what ran, then the stop
    assert told[-1].startswith("No more tools will be called")
