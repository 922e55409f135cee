"""`whiz acp` driven by the ACP SDK's client side over stdio, with the scripted model: the session
life cycle, streamed updates with diffs, and the errors a bad request gets."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from acp import RequestError, image_block, text_block

from tests.acp.conftest import ROOT, SCRIPT, Editor, replies, sr, whiz_acp

RENAME = sr("greet.py", "def say_hello(name):", "def greet(name):")


async def prompt(conn, session_id: str, text: str, timeout_s: float = 60):
    return await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=[text_block(text)]), timeout_s)


async def test_initialize_advertises_loading_and_new_session_offers_the_modes(tmp_path, project) -> None:
    async with whiz_acp(tmp_path, project, [], Editor()) as conn:
        caps = conn.init.agent_capabilities
        assert caps.load_session and caps.prompt_capabilities.embedded_context
        assert conn.init.agent_info.name == "whiz"
        new = await conn.new_session(cwd=str(project))
        assert new.session_id
        assert new.modes.current_mode_id == "fast"
        assert [m.id for m in new.modes.available_modes] == ["fast", "deep", "auto"]


async def test_a_prompt_that_edits_streams_the_reply_and_the_edit_as_a_diff(tmp_path, project) -> None:
    editor = Editor()
    async with whiz_acp(tmp_path, project, replies(RENAME), editor) as conn:
        new = await conn.new_session(cwd=str(project))
        # More than a rename, so the model makes it (a rename alone is exact: editing/rename.py).
        done = await prompt(
            conn, new.session_id, "Rename say_hello to greet in greet.py, and say what you did"
        )
    assert done.stop_reason == "end_turn"
    assert (project / "greet.py").read_text().startswith("def greet(name):")
    chunks = editor.of("agent_message_chunk")
    assert len(chunks) > 3, "the reply streams in pieces"
    assert editor.text() == RENAME
    [edit] = [u for u in editor.of("tool_call") if u.kind == "edit"]
    assert edit.status == "completed"
    [diff] = edit.content
    assert diff.type == "diff" and diff.path == str(project / "greet.py")
    assert diff.old_text.startswith("def say_hello(name):")
    assert diff.new_text.startswith("def greet(name):")
    assert editor.kinds().index("tool_call") > editor.kinds().index("agent_message_chunk")


@pytest.mark.parametrize(("answer", "runs"), [("allow_once", True), ("reject_once", False)])
async def test_a_command_asks_the_editor_and_runs_only_if_allowed(tmp_path, project, answer, runs) -> None:
    editor = Editor(answers=[answer])
    script = replies("RUN touch ran.txt", "All done.")
    async with whiz_acp(tmp_path, project, script, editor) as conn:
        new = await conn.new_session(cwd=str(project))
        done = await prompt(conn, new.session_id, "Create ran.txt by running touch")
    assert done.stop_reason == "end_turn"
    [(tool_call, options)] = editor.asked
    assert tool_call.kind == "execute" and "touch ran.txt" in tool_call.title
    assert {o.kind for o in options} == {"allow_once", "allow_always", "reject_once"}
    assert (project / "ran.txt").exists() is runs
    [command] = [u for u in editor.of("tool_call") if u.kind == "execute"]
    finished = [u for u in editor.of("tool_call_update") if u.tool_call_id == command.tool_call_id]
    assert finished[-1].status == ("completed" if runs else "failed")


async def test_always_allowing_a_command_asks_no_more_for_it(tmp_path, project) -> None:
    editor = Editor(answers=["allow_always"])
    script = replies("RUN touch ran.txt", "Done.", "RUN touch ran.txt", "Done again.")
    async with whiz_acp(tmp_path, project, script, editor) as conn:
        new = await conn.new_session(cwd=str(project))
        await prompt(conn, new.session_id, "Create ran.txt by running touch")
        (project / "ran.txt").unlink()
        await prompt(conn, new.session_id, "Once more")
    assert len(editor.asked) == 1
    assert (project / "ran.txt").exists()


@pytest.mark.parametrize(("answer", "changed"), [("allow_once", True), ("reject_once", False)])
async def test_editing_a_secret_file_asks_first(tmp_path, project, answer, changed) -> None:
    (project / "app.env").write_text("TOKEN=old\n")
    editor = Editor(answers=[answer])
    script = replies(sr("app.env", "TOKEN=old", "TOKEN=new"), "Done.", "Done.")
    async with whiz_acp(tmp_path, project, script, editor) as conn:
        new = await conn.new_session(cwd=str(project))
        await prompt(conn, new.session_id, "Set the token to new")  # not naming it: asked
    assert len(editor.asked) == 1 and "app.env" in editor.asked[0][0].title
    assert (project / "app.env").read_text() == ("TOKEN=new\n" if changed else "TOKEN=old\n")


async def test_cancel_stops_the_turn_promptly(tmp_path, project) -> None:
    editor = Editor()
    slow = [{"text": "word " * 400, "delay_s": 0.05, "chunk_chars": 5}]
    async with whiz_acp(tmp_path, project, slow, editor) as conn:
        new = await conn.new_session(cwd=str(project))
        running = asyncio.ensure_future(prompt(conn, new.session_id, "Talk for a long time"))
        while not editor.of("agent_message_chunk"):
            await asyncio.sleep(0.05)
        streamed = len(editor.of("agent_message_chunk"))
        await conn.cancel(session_id=new.session_id)
        done = await asyncio.wait_for(running, 10)
    assert done.stop_reason == "cancelled"
    # The model stopped when told, not when the agent's grace (2 s: 40 more chunks) cut it off:
    # no more than the chunks already on their way.
    after = len(editor.of("agent_message_chunk")) - streamed
    assert after <= 5, f"{after} chunks came after the cancel"


async def test_cancel_while_the_editor_is_asked_stops_and_runs_nothing(tmp_path, project) -> None:
    editor = Editor(answers=["allow_once"], permission_delay_s=30)
    async with whiz_acp(tmp_path, project, replies("RUN touch ran.txt", "Done."), editor) as conn:
        new = await conn.new_session(cwd=str(project))
        running = asyncio.ensure_future(prompt(conn, new.session_id, "Create ran.txt by running touch"))
        while not editor.asked:
            await asyncio.sleep(0.05)
        await conn.cancel(session_id=new.session_id)
        done = await asyncio.wait_for(running, 20)  # the editor answers only after 30 s
    assert done.stop_reason == "cancelled"
    assert not (project / "ran.txt").exists()


async def test_a_second_prompt_while_one_runs_is_refused_and_the_first_finishes(tmp_path, project) -> None:
    editor = Editor()
    script = [{"text": "Looking at it. " * 20, "delay_s": 0.02}]
    async with whiz_acp(tmp_path, project, script, editor) as conn:
        new = await conn.new_session(cwd=str(project))
        first = asyncio.ensure_future(prompt(conn, new.session_id, "Explain greet.py"))
        while not editor.of("agent_message_chunk"):
            await asyncio.sleep(0.02)
        with pytest.raises(RequestError) as refused:
            await prompt(conn, new.session_id, "And another thing")
        done = await first
    assert refused.value.code == -32600 and "already running" in str(refused.value)
    assert done.stop_reason == "end_turn"
    assert editor.text() == "Looking at it. " * 20


async def test_bad_requests_get_clear_errors_and_the_session_goes_on(tmp_path, project) -> None:
    editor = Editor()
    async with whiz_acp(tmp_path, project, replies("Hello there."), editor) as conn:
        with pytest.raises(RequestError) as unknown:
            await prompt(conn, "sess_nope", "hi")
        assert unknown.value.code == -32002 and "sess_nope" in str(unknown.value)
        with pytest.raises(RequestError) as bad_cwd:
            await conn.new_session(cwd="relative/folder")
        assert bad_cwd.value.code == -32602 and "absolute" in str(bad_cwd.value)
        new = await conn.new_session(cwd=str(project))
        with pytest.raises(RequestError) as bad_mode:
            await conn.set_session_mode(session_id=new.session_id, mode_id="turbo")
        assert bad_mode.value.code == -32602 and "fast, deep or auto" in str(bad_mode.value)
        with pytest.raises(RequestError) as no_deep:
            await conn.set_session_mode(session_id=new.session_id, mode_id="deep")
        assert no_deep.value.code == -32603 and "could not switch to deep" in str(no_deep.value)
        with pytest.raises(RequestError) as image:
            await conn.prompt(session_id=new.session_id, prompt=[image_block("aGk=", "image/png")])
        assert image.value.code == -32602 and "image" in str(image.value)
        with pytest.raises(RequestError) as loaded:
            await conn.load_session(cwd=str(project), session_id="sess_missing")
        assert loaded.value.code == -32002
        with pytest.raises(RequestError) as malformed:
            await conn._conn.send_request("session/prompt", {"sessionId": new.session_id})
        assert malformed.value.code == -32602
        done = await prompt(conn, new.session_id, "Say hello")
    assert done.stop_reason == "end_turn" and editor.text() == "Hello there."


async def test_a_failed_turn_says_why_in_the_editor(tmp_path, project) -> None:
    editor = Editor()
    async with whiz_acp(tmp_path, project, [], editor) as conn:  # the model has nothing to say
        new = await conn.new_session(cwd=str(project))
        done = await prompt(conn, new.session_id, "Say something")
    assert done.stop_reason == "end_turn"
    assert "The turn failed: " in editor.text() and "no more replies" in editor.text()


async def test_set_mode_switches_the_model_that_answers(tmp_path, project) -> None:
    editor = Editor()
    script = {"fast": replies("fast here."), "deep": replies("deep here.")}
    async with whiz_acp(tmp_path, project, script, editor) as conn:
        new = await conn.new_session(cwd=str(project))
        await conn.set_session_mode(session_id=new.session_id, mode_id="deep")
        assert editor.of("current_mode_update")[-1].current_mode_id == "deep"
        await prompt(conn, new.session_id, "Who answers?")
    assert "deep here." in editor.text() and "fast here." not in editor.text()


async def test_a_stored_session_loads_with_its_history_and_goes_on(tmp_path, project) -> None:
    async with whiz_acp(tmp_path, project, replies(RENAME), Editor()) as conn:
        new = await conn.new_session(cwd=str(project))
        await prompt(conn, new.session_id, "Rename say_hello to greet in greet.py")
    editor = Editor()
    async with whiz_acp(tmp_path, project, replies("It is called greet now."), editor) as conn:
        listed = await conn.list_sessions(cwd=str(project))
        assert [s.session_id for s in listed.sessions] == [new.session_id]
        loaded = await conn.load_session(cwd=str(project), session_id=new.session_id)
        assert loaded.modes.current_mode_id == "fast"
        replayed = [u.content.text for u in editor.of("user_message_chunk")]
        assert replayed == ["Rename say_hello to greet in greet.py"]
        done = await prompt(conn, new.session_id, "What is the function called now?")
    assert done.stop_reason == "end_turn"
    assert editor.text().endswith("It is called greet now.")


async def test_files_go_through_the_editor_when_it_offers_fs(tmp_path, project) -> None:
    # The editor holds greet.py with an unsaved change: the agent edits that text, not the disk's.
    path = str(project / "greet.py")
    unsaved = "def say_hello(name):\n    return 'Hi, ' + name  # unsaved\n"
    editor = Editor(buffers={path: unsaved})
    async with whiz_acp(tmp_path, project, replies(RENAME), editor, fs=True) as conn:
        new = await conn.new_session(cwd=str(project))
        done = await prompt(conn, new.session_id, "Rename say_hello to greet in greet.py")
    assert done.stop_reason == "end_turn"
    assert path in editor.reads
    assert editor.writes == [(path, unsaved.replace("say_hello", "greet"))]
    assert (project / "greet.py").read_text() == 'def say_hello(name):\n    return "Hello, " + name\n'
    [edit] = [u for u in editor.of("tool_call") if u.kind == "edit"]
    assert edit.content[0].old_text == unsaved


async def test_without_fs_the_disk_is_used_and_the_editor_is_not_asked(tmp_path, project) -> None:
    editor = Editor()
    async with whiz_acp(tmp_path, project, replies(RENAME), editor, fs=False) as conn:
        new = await conn.new_session(cwd=str(project))
        await prompt(conn, new.session_id, "Rename say_hello to greet in greet.py")
    assert editor.reads == [] and editor.writes == []
    assert (project / "greet.py").read_text().startswith("def greet(name):")


def rpc(id_: int, method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def test_stdout_carries_only_protocol_lines(tmp_path, project) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "RUN echo noise-on-stdout", "print": "stray"}, {"text": "Done."}]))
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "WHIZ_HOME": str(tmp_path / "home"),
        "WHIZ_TEST_APPROVAL": "full-auto",
    }
    requests = [
        "this is not json",
        rpc(1, "initialize", {"protocolVersion": 1}),
        rpc(2, "session/new", {"cwd": str(project), "mcpServers": []}),
    ]
    lines = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in requests)
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(script)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=project, env=env, text=True,
    )  # fmt: skip
    assert proc.stdin and proc.stdout
    proc.stdin.write(lines)
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    session_id = answers[1]["result"]["sessionId"]
    turn = {"sessionId": session_id, "prompt": [{"type": "text", "text": "Print something"}]}
    proc.stdin.write(json.dumps(rpc(3, "session/prompt", turn)) + "\n")
    proc.stdin.flush()
    seen = []
    while True:
        message = json.loads(proc.stdout.readline())  # every line is JSON-RPC, or this raises
        seen.append(message)
        if message.get("id") == 3:
            break
    _, stderr = proc.communicate(timeout=30)
    assert [a["id"] for a in answers] == [1, 2]
    assert seen[-1]["result"]["stopReason"] == "end_turn"
    assert any("noise-on-stdout" in json.dumps(m) for m in seen[:-1]), "the command's output is an update"
    assert "stray" in stderr and "stray (fd 1)" in stderr  # what a library printed went to stderr
