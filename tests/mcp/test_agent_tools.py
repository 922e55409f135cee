"""MCP tools through the agent: offered in both action formats, called, approved or refused as
the approval mode says, arguments checked against the schema, and failures the turn survives."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.mcp.conftest import mcp_agent, stdio_notes
from whiz.agent.approvals import Approvals, ScriptedApprover
from whiz.agent.models.scripted_model import Reply
from whiz.agent.tools import MAX_OUTPUT_CHARS
from whiz.mcp.config import server

READ = 'CALL notes__read_note {"name": "shop"}'
WRITE = 'CALL notes__write_note {"name": "todo", "text": "call mum"}'


def told(h, n: int) -> str:
    """The last message the model was sent in its request `n` (what it read back)."""
    return str(h.model.requests[n].items[-1].get("content") or h.model.requests[n].items[-1].get("output"))


async def test_text_actions_list_the_tools_and_a_call_reads_back_its_result(project: Path, notes: Path):
    async with mcp_agent(project, [READ, "The note says buy milk."], [stdio_notes(notes)]) as h:
        result = await h.agent.run("What does my shop note say?")
    assert result.ok, result.message
    instructions = h.model.requests[0].instructions
    # Each tool's line to copy, its required arguments with placeholders, then what it does.
    assert 'CALL notes__read_note {"name": "..."}  -- Show the note called `name`.' in instructions
    assert 'CALL notes__write_note {"name": "...", "text": "..."} (may also take: repeat)' in instructions
    assert "buy milk" in told(h, 1)
    [item] = h.events.items("tool_call")
    assert item["tool"] == "notes__read_note" and item["status"] == "completed"
    assert item["arguments"] == {"name": "shop"} and "buy milk" in item["output"]
    assert h.said == ["MCP server notes: 4 tools"]


async def test_function_tools_offer_the_schemas_and_the_output_goes_back_with_the_call(project, notes):
    call = Reply(calls=[("notes__read_note", {"name": "shop"})])
    async with mcp_agent(project, [call, "buy milk"], [stdio_notes(notes)], actions="tools") as h:
        result = await h.agent.run("What does my shop note say?")
    assert result.ok, result.message
    offered = {t["name"]: t for t in h.model.requests[0].tools}
    assert {"read_file", "run_command", "notes__read_note", "notes__write_note"} <= set(offered)
    assert offered["notes__write_note"]["parameters"]["required"] == ["name", "text"]
    output = h.model.requests[1].items[-1]
    assert output["type"] == "function_call_output" and "buy milk" in output["output"]


async def test_the_same_read_only_call_again_in_a_turn_is_answered_from_the_first(project: Path, notes: Path):
    call = Reply(calls=[("notes__read_note", {"name": "shop"})])
    async with mcp_agent(project, [call, call, "buy milk"], [stdio_notes(notes)], actions="tools") as h:
        result = await h.agent.run("What does my shop note say?")
    assert result.ok, result.message
    again = h.model.requests[2].items[-1]["output"]
    assert "already called notes__read_note" in again and "buy milk" in again
    assert len(h.events.items("tool_call")) == 1  # the server was asked once


async def test_a_tool_called_again_is_not_offered_again_until_the_next_turn(project: Path, notes: Path):
    """Told that it already has the answer, a small model under a tool grammar still called the
    same tool every step to the time limit: the repeated tool leaves the list for the turn."""
    call = Reply(calls=[("notes__read_note", {"name": "shop"})])
    script = [call, call, "buy milk", call, "buy milk"]
    async with mcp_agent(project, script, [stdio_notes(notes)], actions="tools") as h:
        assert (await h.agent.run("What does my shop note say?")).ok
        offered = [{t["name"] for t in r.tools} for r in h.model.requests]
        assert "notes__read_note" in offered[1] and "notes__read_note" not in offered[2]
        assert "notes__write_note" in offered[2]  # only the repeated tool is taken off
        assert (await h.agent.run("And again?")).ok
        assert "notes__read_note" in {t["name"] for t in h.model.requests[3].tools}


async def test_a_writing_tool_is_put_to_the_approver_in_auto_edit(project: Path, notes: Path):
    approver = ScriptedApprover([True])
    approvals = Approvals("auto-edit", approver)
    async with mcp_agent(project, [WRITE, "Saved."], [stdio_notes(notes)], approvals=approvals) as h:
        result = await h.agent.run("Note that I must call mum")
    assert result.ok, result.message
    [asked] = approver.asked
    assert asked.kind == "tool" and "notes__write_note" in asked.summary and "call mum" in asked.summary
    assert asked.detail == 'notes__write_note {"name": "todo", "text": "call mum"}'
    assert (notes / "todo.txt").read_text() == "call mum"


async def test_a_declined_call_is_not_made_and_the_model_is_told(project: Path, notes: Path):
    approvals = Approvals("auto-edit", ScriptedApprover([False]))
    async with mcp_agent(project, [WRITE, "Not saved."], [stdio_notes(notes)], approvals=approvals) as h:
        result = await h.agent.run("Note that I must call mum")
    assert result.ok
    assert not (notes / "todo.txt").exists()
    assert "did not approve calling notes__write_note" in told(h, 1)
    [item] = h.events.items("tool_call")
    assert item["status"] == "declined"


async def test_a_declined_tool_is_not_offered_again_in_the_turn(project: Path, notes: Path):
    """Refused, the 0.5B called the same writing tool again every step to the step limit."""
    approvals = Approvals("auto-edit", ScriptedApprover([False]))
    call = Reply(calls=[("notes__write_note", {"name": "todo", "text": "call mum"})])
    async with mcp_agent(
        project, [call, "Not saved."], [stdio_notes(notes)], approvals=approvals, actions="tools"
    ) as h:
        assert (await h.agent.run("Note that I must call mum")).ok
    offered = [{t["name"] for t in r.tools} for r in h.model.requests]
    assert "notes__write_note" in offered[0] and "notes__write_note" not in offered[1]
    assert "notes__read_note" in offered[1]


async def test_a_read_only_tool_runs_without_asking(project: Path, notes: Path):
    approver = ScriptedApprover([])
    approvals = Approvals("auto-edit", approver)
    async with mcp_agent(project, [READ, "buy milk"], [stdio_notes(notes)], approvals=approvals) as h:
        await h.agent.run("What does my shop note say?")
    assert approver.asked == [] and "buy milk" in told(h, 1)


async def test_read_only_mode_offers_and_runs_only_read_only_tools(project: Path, notes: Path):
    approver = ScriptedApprover([True])
    approvals = Approvals("read-only", approver)
    replies = [WRITE, READ, "buy milk"]
    config = {"approvals": approvals, "approval": "read-only"}
    async with mcp_agent(project, replies, [stdio_notes(notes)], **config) as h:
        result = await h.agent.run("What does my shop note say?")
    assert result.ok, result.message
    instructions = h.model.requests[0].instructions
    assert "notes__read_note" in instructions and "notes__write_note" not in instructions
    assert "There is no tool named 'notes__write_note'" in told(h, 1)  # not offered: not callable
    assert not (notes / "todo.txt").exists() and approver.asked == []
    assert "buy milk" in told(h, 2)


async def test_full_auto_makes_a_writing_call_without_asking(project: Path, notes: Path):
    approver = ScriptedApprover([])
    approvals = Approvals("full-auto", approver)
    async with mcp_agent(project, [WRITE, "Saved."], [stdio_notes(notes)], approvals=approvals) as h:
        await h.agent.run("Note that I must call mum")
    assert (notes / "todo.txt").read_text() == "call mum" and approver.asked == []


async def test_arguments_that_break_the_schema_are_refused_before_the_call(project: Path, notes: Path):
    missing = 'CALL notes__write_note {"name": "todo"}'
    wrong = 'CALL notes__write_note {"name": "todo", "text": "x", "repeat": "twice"}'
    approver = ScriptedApprover([True])
    replies = [missing, wrong, "Could not."]
    approvals = Approvals("auto-edit", approver)
    async with mcp_agent(project, replies, [stdio_notes(notes)], approvals=approvals) as h:
        result = await h.agent.run("Note something")
    assert "'text' is a required property" in told(h, 1)
    assert "repeat" in told(h, 2) and "is not of type 'integer'" in told(h, 2)
    assert not (notes / "todo.txt").exists() and approver.asked == []  # never asked, never called
    assert result.stats.malformed_actions == 2


async def test_words_after_the_name_are_the_one_string_argument_of_a_tool_that_has_one(project, notes):
    replies = ["CALL notes__read_note shop", "CALL notes__write_note call mum", "buy milk"]
    async with mcp_agent(project, replies, [stdio_notes(notes)], approval="full-auto") as h:
        await h.agent.run("What does my shop note say?")
    assert "buy milk" in told(h, 1)
    assert "must be one line of JSON" in told(h, 2)  # two required arguments: words cannot say which
    assert not (notes / "todo.txt").exists()


async def test_bad_json_and_an_unknown_tool_get_feedback(project: Path, notes: Path):
    replies = ["CALL notes__read_note {name: shop}", 'CALL notes__nothing {"a": 1}', READ, "buy milk"]
    async with mcp_agent(project, replies, [stdio_notes(notes)]) as h:
        result = await h.agent.run("What does my shop note say?")
    assert result.ok, result.message
    assert "not valid JSON" in told(h, 1)
    assert "There is no tool named 'notes__nothing'" in told(h, 2) and "notes__read_note" in told(h, 2)


async def test_a_tool_that_reports_an_error_is_read_back_and_the_turn_goes_on(project: Path, notes: Path):
    replies = ['CALL notes__read_note {"name": "nope"}', READ, "buy milk"]
    async with mcp_agent(project, replies, [stdio_notes(notes)]) as h:
        result = await h.agent.run("What does my nope note say?")
    assert result.ok, result.message
    assert "The tool reported an error: " in told(h, 1) and "no note called nope" in told(h, 1)
    assert [i["status"] for i in h.events.items("tool_call")] == ["failed", "completed"]


async def test_a_server_that_crashes_mid_run_leaves_the_turn_going(project: Path, notes: Path):
    replies = ["CALL notes__crash", READ, "The notes server is gone."]
    async with mcp_agent(project, replies, [stdio_notes(notes)], approval="full-auto") as h:
        result = await h.agent.run("Crash the notes server, then read my shop note")
    assert result.ok, result.message
    assert "stopped during the call" in told(h, 1)
    assert "not running" in told(h, 2)
    assert any("stopped during a call of crash" in line for line in h.said)


async def test_a_call_past_its_timeout_is_given_up(project: Path, notes: Path):
    slow = stdio_notes(notes, tool_timeout_sec=1)
    replies = ['CALL notes__sleep {"seconds": 20}', READ, "buy milk"]
    async with mcp_agent(project, replies, [slow]) as h:
        # The call's own timeout gives up on it, and the model is told so: a call that ran its
        # 20 s out would have answered.
        result = await h.agent.run("Sleep, then read my shop note")
    assert result.ok, result.message
    assert "did not answer within 1 s" in told(h, 1)
    assert "buy milk" in told(h, 2)  # the server still answers after a call it gave up on


async def test_a_server_that_does_not_start_is_said_and_the_others_serve(project: Path, notes: Path):
    missing = server("gone", {"command": "no-such-mcp-server-program"}, "test")
    async with mcp_agent(project, [READ, "buy milk"], [missing, stdio_notes(notes)]) as h:
        result = await h.agent.run("What does my shop note say?")
    assert result.ok, result.message
    assert any("MCP server gone" in line and "no such program" in line for line in h.said)
    assert "gone__" not in h.model.requests[0].instructions and "buy milk" in told(h, 1)


async def test_a_slow_start_holds_the_first_request_only_to_its_bound(project: Path, notes: Path):
    # A program that never speaks MCP: the first request waits its startup timeout, no longer.
    hung = server("hung", {"command": "sleep", "args": ["60"], "startup_timeout_sec": 1}, "test")
    async with mcp_agent(project, ["Hello."], [hung]) as h:
        # Its startup timeout ends the wait (and says so); this one only fails a request that
        # waited for the program's 60 s.
        result = await asyncio.wait_for(h.agent.run("Say hello"), 30)
    assert result.ok
    assert any("did not start within 1 s" in line for line in h.said)


async def test_results_are_trimmed_and_secret_values_masked(project: Path, notes: Path):
    (project / ".env").write_text("API_KEY=sk-live-0123456789abcdef\n")
    (notes / "big.txt").write_text("key sk-live-0123456789abcdef\n" + "x" * 50_000)
    replies = ['CALL notes__read_note {"name": "big"}', "Read it."]
    async with mcp_agent(project, replies, [stdio_notes(notes)]) as h:
        await h.agent.run("Read my big note")
    back = told(h, 1)
    assert "sk-live-0123456789abcdef" not in back and "key " in back
    assert len(back) < MAX_OUTPUT_CHARS + 500


async def test_streamable_http_server(project: Path, http_notes: str):
    configured = server("web", {"url": http_notes, "http_headers": {"X-Test": "1"}}, "test")
    replies = ['CALL web__read_note {"name": "shop"}', "buy milk"]
    async with mcp_agent(project, replies, [configured]) as h:
        result = await h.agent.run("What does my shop note say?")
    assert result.ok, result.message
    assert "buy milk" in told(h, 1) and h.said == ["MCP server web: 4 tools"]


async def test_without_servers_the_agent_offers_only_its_own_tools(harness) -> None:
    h = harness([Reply(calls=[("notes__read_note", {"name": "shop"})]), "No such tool."], actions="tools")
    result = await h.agent.run("What does my shop note say?")
    assert result.ok, result.message
    assert "CALL" not in h.model.requests[0].instructions
    assert [t["name"] for t in h.model.requests[0].tools] == [
        "read_file", "list_files", "search_text", "edit_file", "create_file", "run_command"
    ]  # fmt: skip
    assert "There is no tool named 'notes__read_note'" in h.model.requests[1].items[-1]["output"]
