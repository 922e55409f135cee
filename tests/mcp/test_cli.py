"""`whiz exec --mcp` as a user runs it: a subprocess against a server on the fake engine, whose
script calls the notes server's tool in text actions."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.commands.test_exec import events, whiz
from tests.mcp.conftest import TINY
from whiz.engine.fake import last_user_message


def notes_script(conversation: str) -> str:
    if "notes__read_note:" in last_user_message(conversation):  # the call's result came back
        return "The note says buy milk."
    return 'CALL notes__read_note {"name": "shop"}'


def test_exec_offers_and_calls_a_server_from_the_flag(serve_fake, project, notes, tmp_path, monkeypatch):
    server = serve_fake(script=notes_script)
    flag = f"notes={shlex.join([sys.executable, str(TINY), 'stdio', str(notes)])}"
    config = tmp_path / "config.toml"
    config.write_text('[mcp_servers.typo]\ncomand = "x"\n')
    monkeypatch.setenv("WHIZ_CONFIG", str(config))
    args = ["exec", "--json", "--base-url", server.root, "--mcp", flag, "What does my shop note say?"]
    done = whiz(args, project, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    calls = [e["item"] for e in events(done.stdout) if e["type"] == "item.completed"]
    [call] = [i for i in calls if i["type"] == "tool_call"]
    assert call["tool"] == "notes__read_note" and call["server"] == "MCP server notes"
    assert "buy milk" in call["output"]
    # The file's mistake is said, and the run went on without that server.
    assert "unknown key 'comand' in [mcp_servers.typo] (did you mean 'command'?)" in done.stderr
    assert "MCP server notes: 4 tools" in done.stderr


def test_a_bad_flag_exits_with_the_form(project: Path, tmp_path: Path) -> None:
    done = whiz(["exec", "--mcp", "justaname", "hello"], project, tmp_path / "home")
    assert done.returncode == 2 and "--mcp takes NAME=COMMAND" in done.stderr


def wandering_script(conversation: str) -> str:
    """Reads the note it was asked to, then calls a tool nobody asked for, until told to answer."""
    said = last_user_message(conversation)
    if said.startswith("No more tools will be called"):
        return "The note says buy milk."
    if "notes__read_note:" in said:
        return 'CALL notes__sleep {"seconds": 3}'
    return 'CALL notes__read_note {"name": "shop"}'


def test_exec_says_why_the_tool_calls_stopped_and_answers(serve_fake, project, notes, tmp_path):
    server = serve_fake(script=wandering_script)
    flag = f"notes={shlex.join([sys.executable, str(TINY), 'stdio', str(notes)])}"
    task = "Use notes__read_note to read my shop note and tell me what it says."
    done = whiz(["exec", "--base-url", server.root, "--mcp", flag, task], project, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert "The note says buy milk." in done.stdout
    assert (
        "whiz: tool calls stopped: notes__sleep was not called: the task asked for notes__read_note, "
        "which answered, and this call uses nothing the task or a result gave"
    ) in done.stderr
    assert "notes__sleep 3" not in done.stderr  # the call was not made


def calling_script(conversation: str) -> str:
    """Calls the tool it was asked to, then the same call again, and again when told to answer."""
    return 'CALL notes__read_note {"name": "shop"}'


def test_exec_prints_the_result_as_the_answer_when_the_model_gives_none(serve_fake, project, notes, tmp_path):
    server = serve_fake(script=calling_script)
    flag = f"notes={shlex.join([sys.executable, str(TINY), 'stdio', str(notes)])}"
    task = "Use notes__read_note to read my shop note and tell me what it says."
    done = whiz(["exec", "--base-url", server.root, "--mcp", flag, task], project, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("notes__read_note returned:\nbuy milk\n")
    assert "it was already called with these arguments in this turn" in done.stderr
