"""The agent loop against a scripted model: edits, feedback on malformed edits, limits, tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.agent.conftest import GREET, Harness, sr
from whiz.agent.models.scripted_model import Reply
from whiz.agent.models.seam import Finished


async def test_edit_block_is_applied_and_the_turn_completes(harness, project: Path) -> None:
    h = harness([sr("greet.py", "def say_hello(name):", "def greet(name):")])
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    assert (project / "greet.py").read_text().startswith("def greet(name):")
    assert result.changed == ["greet.py"]
    types = h.events.types()
    assert types[0] == "turn.started" and types[-1] == "turn.completed"
    [change] = h.events.items("file_change")
    assert change["status"] == "completed" and change["changes"] == [{"path": "greet.py", "kind": "update"}]
    assert "+def greet(name):" in change["diff"]


async def test_named_files_are_attached_to_the_task(harness) -> None:
    h = harness(["Nothing to change."])
    await h.agent.run("Look at greet.py")
    first = h.model.requests[0].items[0]["content"]
    assert "def say_hello(name):" in first  # the file's text came with the task
    # ...and the model is told to predict the file (Predicted Outputs) when it answers.
    assert h.model.requests[0].prediction == GREET


async def test_a_miss_gets_the_nearest_lines_and_a_retry(harness, project: Path) -> None:
    wrong = sr("greet.py", "def say_helo(nam):", "def greet(name):")
    right = sr("greet.py", "def say_hello(name):", "def greet(name):")
    h = harness([wrong, right])
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok
    feedback = h.model.requests[1].items[-1]["content"]
    assert "say_hello" in feedback  # the nearest lines in the file, so the model can copy them
    assert h.events.items("error"), "the miss is reported as an error item"
    assert (project / "greet.py").read_text().startswith("def greet(name):")
    assert result.stats.edit_attempts == 2 and result.stats.edits_applied == 1


async def test_an_edit_of_the_prompts_example_path_goes_to_the_one_file_of_that_name(harness, project: Path):
    # Seen in whiz bench agent (auto, EditEval 1 and 4): "path/to/edit_1.py", copied from the
    # instructions' example, three times in a row until the turn failed.
    h = harness([sr("path/to/greet.py", "def say_hello(name):", "def greet(name):")])
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    assert (project / "greet.py").read_text().startswith("def greet(name):")
    assert not (project / "path").exists()


async def test_a_new_program_written_as_search_replace_is_created(harness, project: Path):
    # Seen in whiz bench agent (programs, fast and auto): "Write fizzbuzz.py" answered with a
    # SEARCH of what the model imagined and a REPLACE of the program, once under the example
    # folder "path/to/", refused three times ("does not exist") until the turn failed.
    program = 'for i in range(3):\n    print("Fizz" if i % 3 == 0 else i)\n'
    h = harness([sr("path/to/fizz.py", "for i in range(3):\n    print(i)", program.rstrip())])
    result = await h.agent.run("Write fizz.py: print Fizz for multiples of 3.")
    assert result.ok, result.message
    assert (project / "fizz.py").read_text() == program
    assert not (project / "path").exists()
    # The instructions' own example, echoed back, creates nothing.
    echo = sr("path/to/file.py", "the exact lines to change", "the new lines")
    h = harness([echo, echo, echo, "unused"])
    result = await h.agent.run("Write fizz.py: print Fizz for multiples of 3.")
    assert (
        result.status == "failed" and not (project / "path").exists() and not (project / "file.py").exists()
    )
    assert "example folder" in h.model.requests[1].items[-1]["content"]


async def test_an_edit_of_the_instructions_example_path_goes_to_the_one_file_the_task_names(harness, project):
    # Seen in whiz bench agent: the 1.5B put its (right) SEARCH/REPLACE under `path/to/file.py`.
    h = harness([sr("path/to/file.py", "def say_hello(name):", "def greet(name):")])
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    assert (project / "greet.py").read_text().startswith("def greet(name):")
    assert not (project / "path").exists()


async def test_three_malformed_replies_fail_the_turn_and_change_nothing(harness, project: Path) -> None:
    wrong = sr("greet.py", "def nothing_like_it():", "def greet(name):")
    h = harness([wrong, wrong, wrong, "unused"])
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.status == "failed"
    assert "3 times" in result.message
    # The same reply twice (seen: the deep model's SEARCH, word for word, after being told what
    # was not in the file): the third is sampled, and does not see the two it would copy.
    assert [r.temperature for r in h.model.requests] == [None, None, 0.7]
    assert len(h.model.requests[2].items) == 1
    assert (project / "greet.py").read_text() == GREET
    assert h.events.types()[-1] == "turn.failed"
    assert len(h.model.requests) == 3  # two retries, then it stops asking


async def test_an_edit_block_that_does_not_parse_gets_feedback(harness, project: Path) -> None:
    broken = "greet.py\n<<<<<<< SEARCH\ndef say_hello(name):\n>>>>>>> REPLACE\n"
    h = harness([broken, sr("greet.py", "def say_hello(name):", "def greet(name):")])
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok
    assert "=======" in h.model.requests[1].items[-1]["content"]


async def test_a_path_outside_the_workspace_is_refused(harness, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    h = harness([sr("../outside.txt", "", "pwned"), "I cannot do that."])
    result = await h.agent.run("write ../outside.txt")
    assert not outside.exists()
    assert not result.ok and "none was made: I cannot do that." in result.message
    assert "inside the project" in h.model.requests[1].items[-1]["content"]


async def test_read_then_edit(harness, project: Path) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "util.py").write_text("X = 1\n")
    h = harness(["READ pkg/util.py", sr("pkg/util.py", "X = 1", "X = 2")])
    result = await h.agent.run("Set X to 2")
    assert result.ok
    assert "X = 1" in h.model.requests[1].items[-1]["content"]
    assert h.model.requests[1].prediction == "X = 1\n"  # the file read is the prediction
    assert (project / "pkg" / "util.py").read_text() == "X = 2\n"


async def test_a_plain_answer_ends_the_turn(harness) -> None:
    h = harness(["say_hello returns a greeting."])
    result = await h.agent.run("What does say_hello do?")
    assert result.ok and result.message == "say_hello returns a greeting."
    [message] = h.events.items("agent_message")
    assert message["text"] == "say_hello returns a greeting."


async def test_the_step_limit_fails_the_turn(harness) -> None:
    # Each step looks at something new (the same look again would end the turn sooner: ToolStall).
    h = harness(["LIST .", "READ greet.py", "READ README.md", "GREP say_hello", "GREP Hello"], max_steps=3)
    result = await h.agent.run("Look around forever")
    assert result.status == "failed" and "3 steps" in result.message


async def test_with_a_test_command_the_turn_ends_when_tests_pass(harness, project: Path) -> None:
    (project / "check.py").write_text("import greet\nassert greet.greet('a') == 'Hello, a'\n")
    first = sr(
        "greet.py", 'def say_hello(name):\n    return "Hello, " + name', "def greet(name):\n    return name"
    )
    second = sr("greet.py", "    return name", '    return "Hello, " + name')
    h = harness([first, second], test_cmd="python check.py")
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    assert "the tests pass" in result.message
    assert "AssertionError" in h.model.requests[1].items[-1]["content"]
    commands = h.events.items("command_execution")
    assert [c["status"] for c in commands] == ["failed", "completed"]


async def test_the_file_written_back_unchanged_for_a_change_gets_another_try(harness, project: Path):
    # Seen in whiz bench agent (fast, EditEval 6): the reply was the file as it was; the turn
    # ended there, "asked for a change, but none was made".
    same = f"greet.py\n```python\n{GREET}```\n"
    h = harness([same, sr("greet.py", "def say_hello(name):", "def greet(name):")])
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    feedback = h.model.requests[1].items[-1]["content"]
    assert "unchanged" in feedback and "Rename say_hello to greet" in feedback  # the task, again
    # Not "write only the lines that change, in SEARCH ... in REPLACE ...": the 0.5B answered that
    # with the words SEARCH and REPLACE and no markers (no-edit turns 12% -> 28%, fast EditEval).
    assert "SEARCH" not in feedback
    # ...and sampled: at temperature 0 the same prompt writes the same file again.
    assert h.model.requests[0].temperature is None and h.model.requests[1].temperature == 0.7
    # ...without the unchanged reply, which a small model would copy: the task, then the feedback.
    [asked] = h.model.requests[1].items  # the task and the feedback, in one message
    assert asked["content"].startswith("Rename say_hello") and "unchanged" in asked["content"]
    assert len(h.agent.items) == 5  # the session keeps all of it (task, reply, feedback, reply, applied)
    assert (project / "greet.py").read_text().startswith("def greet(name):")


async def test_code_written_back_unchanged_before_any_edit_is_shown_its_failing_tests(harness, project: Path):
    # Seen in whiz bench agent (fast, EditEval 10, 28, 40, 43): the 0.5B took the code for done and
    # wrote it back, six times with the retries, told only that the task asks for a change. The
    # failing assertion says what is still wrong.
    (project / "check.py").write_text("import greet\nassert greet.greet('a') == 'Hello, a'\n")
    same = f"greet.py\n```python\n{GREET}```\n"
    rename = sr("greet.py", "def say_hello(name):", "def greet(name):")
    h = harness([same, same, rename], test_cmd="python check.py")
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok and "the tests pass" in result.message, result.message
    told = h.model.requests[1].items[-1]["content"]
    assert "unchanged" in told and "the tests failed on" in told
    assert "AttributeError" in told and "greet.greet('a')" in told  # the failing line, and why
    # A retry drawn from the task as given (healing's redraw) is told too, without the reply.
    assert "AttributeError" in h.model.requests[1].retry_from[-1]["content"]
    assert all(i.get("role") != "assistant" for i in h.model.requests[1].retry_from)
    # Run once, on the code as it was; then once more on the edit that passed.
    assert [c["status"] for c in h.events.items("command_execution")] == ["failed", "completed"]
    # The second time it is written back, the retry (which shows only the latest feedback) says so again.
    assert "AttributeError" in h.model.requests[2].items[-1]["content"]


async def test_after_code_written_back_twice_the_retry_shows_the_failing_function_without_its_body(
    harness, project: Path
):
    # Seen in whiz bench agent (fast, EditEval 0, 18, 40, 58): the 0.5B wrote the function back
    # in every reply and sample, the failing assertion in view. Shown its header with `...` for a
    # body, it wrote a body of its own.
    (project / "check.py").write_text("import greet\nassert greet.say_hello('a') == 'Hi, a'\n")
    same = f"greet.py\n```python\n{GREET}```\n"
    # Written back as a SEARCH/REPLACE block whose halves match, under the folder of the example.
    same_block = sr("path/to/greet.py", 'return "Hello, " + name', 'return "Hello, " + name')
    anew = f"greet.py\n```python\n{GREET.replace('Hello, ', 'Hi, ')}```\n"
    h = harness([same, same_block, anew], test_cmd="python check.py")
    result = await h.agent.run("Fix say_hello in greet.py so the check passes")
    assert result.ok and "the tests pass" in result.message, result.message
    first, second, third = (r.items[0]["content"] for r in h.model.requests)
    assert 'return "Hello, " + name' in first and 'return "Hello, " + name' in second
    assert "def say_hello(name):\n    ...\n" in third and 'return "Hello, "' not in third
    assert "The body of `say_hello` is left out above: write that function anew." in third
    assert 'print(say_hello("world"))' in third  # the tests do not name `main`: shown whole
    assert 'return "Hello, "' not in h.model.requests[2].retry_from[-1]["content"]
    assert 'return "Hello, " + name' in h.agent.items[0]["content"]  # the session keeps it all
    # A reply that copies the header and its `...` means the function as it was: left out is
    # not deleted (and that is the code written back once more).
    (project / "greet.py").write_text(GREET)
    hidden = GREET.replace('    return "Hello, " + name', "    ...")
    copied = f"greet.py\n```python\n{hidden}```\n"
    h = harness([same, same, copied], test_cmd="python check.py")
    result = await h.agent.run("Fix say_hello in greet.py so the check passes")
    assert result.status == "failed" and "unchanged" in result.message, result.message
    assert (project / "greet.py").read_text() == GREET


async def test_an_edit_sent_again_after_its_tests_failed_is_code_written_back(harness, project: Path):
    # Seen in whiz bench agent (fast, EditEval 7, 19, 28, 34, 43): told the tests failed, the 0.5B
    # sent its applied edit again, and heard three times that its SEARCH did not match.
    (project / "check.py").write_text("import greet\nassert greet.say_hello('a') == 'Hi, a'\n")
    first = sr(
        "greet.py",
        'def say_hello(name):\n    return "Hello, " + name',
        'def say_hello(name):\n    return "Hey, " + name',
    )
    fixed = sr("greet.py", '    return "Hey, " + name', '    return "Hi, " + name')
    h = harness([first, first, fixed], test_cmd="python check.py")
    result = await h.agent.run("Fix say_hello in greet.py so the check passes")
    assert result.ok, result.message
    told = h.model.requests[2].items[-1]["content"]
    assert "wrote the code back unchanged" in told and "did not match" not in told


async def test_the_code_written_back_unchanged_after_failing_tests_is_not_an_answer(harness, project: Path):
    # Seen in whiz bench agent (fast, EditEval 10): told the tests failed, the model wrote the same
    # file again, and the turn ended on the failing code.
    (project / "check.py").write_text("import greet\nassert greet.greet('a') == 'Hello, a'\n")
    broken = "def greet(name):\n    return name\n"
    first = f"greet.py\n```python\n{broken}```\n"
    fixed = 'greet.py\n```python\ndef greet(name):\n    return "Hello, " + name\n```\n'
    h = harness([first, first, fixed], test_cmd="python check.py")
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    assert "the tests failed on" in h.model.requests[2].items[-1]["content"]
    # With nothing better, the turn fails on the retries, not "completed".
    h = harness([first, first, first, first], test_cmd="python check.py")
    (project / "greet.py").write_text(GREET)
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.status == "failed" and "unchanged" in result.message


async def test_the_test_file_the_test_command_runs_is_left_alone(harness, project: Path):
    # Seen in whiz bench agent (fast, EditEval 11): the reply rewrote the code and quoted the test
    # file back with a broken line; told of the syntax error it wrote both again unchanged, and
    # the turn "completed" without the tests ever running.
    (project / "check.py").write_text("import greet\nassert greet.greet('a') == 'Hello, a'\n")
    fixed = 'def greet(name):\n    return "Hello, " + name\n'
    reply = f"greet.py\n```python\n{fixed}```\n\ncheck.py\n```python\nassert (\n```\n"
    h = harness([reply], test_cmd="python check.py")
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok and "the tests pass" in result.message, result.message
    assert (project / "check.py").read_text().startswith("import greet")
    told = [i["content"] for i in h.agent.items if i.get("role") == "user"]
    assert any("Left out the edit of check.py" in t for t in told)
    # A task that names the test file may change it.
    h = harness(["check.py\n```python\nassert True\n```\n"], test_cmd="python check.py")
    result = await h.agent.run("Simplify check.py")
    assert result.ok and (project / "check.py").read_text() == "assert True\n"


async def test_code_written_back_unchanged_after_failing_checks_runs_the_tests(harness, project: Path):
    # The same turn, before the fix: told its edit left a syntax error, the model wrote the file
    # again unchanged, and the turn ended "completed" on it, its tests never run.
    (project / "check.py").write_text("import greet\nassert greet.greet('a') == 'Hello, a'\n")
    broken = 'greet.py\n```python\ndef greet(name):\n    return ("Hello, " + name\n```\n'
    fixed = 'greet.py\n```python\ndef greet(name):\n    return "Hello, " + name\n```\n'
    h = harness([broken, broken, fixed], check_edits=True, test_cmd="python check.py")
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    assert [c["status"] for c in h.events.items("command_execution")] == ["failed", "completed"]


async def test_tool_calls_edit_and_answer_with_function_outputs(harness, project: Path) -> None:
    call = (
        "edit_file",
        {"path": "greet.py", "old_text": "def say_hello(name):", "new_text": "def greet(name):"},
    )
    h = harness([Reply(calls=[("read_file", {"path": "greet.py"})]), Reply(calls=[call])], actions="tools")
    result = await h.agent.run("Rename say_hello to greet")
    assert result.ok
    request = h.model.requests[1]
    assert request.tools and {t["name"] for t in request.tools} >= {"read_file", "edit_file", "run_command"}
    output = request.items[-1]
    assert output["type"] == "function_call_output" and "def say_hello" in output["output"]
    assert (project / "greet.py").read_text().startswith("def greet(name):")


async def test_bad_tool_arguments_get_feedback(harness) -> None:
    h = harness(
        [Reply(calls=[("edit_file", "{not json")]), Reply(calls=[("nope", {})]), "ok"], actions="tools"
    )
    result = await h.agent.run("do it")
    assert result.ok
    assert "not valid JSON" in h.model.requests[1].items[-1]["output"]
    assert "no tool named 'nope'" in h.model.requests[2].items[-1]["output"]


async def test_losing_the_server_fails_the_turn_with_the_reason(harness, project: Path) -> None:
    from whiz.client import ConnectionLost

    h = harness(["READ greet.py", ConnectionLost("ws://127.0.0.1:1/v1/responses: connection closed")])
    result = await h.agent.run("look")
    assert result.status == "failed" and "connection closed" in result.message
    assert h.events.events[-1] == {
        "type": "turn.failed",
        "turn_id": result.turn_id,
        "error": {"message": result.message},
        "usage": result.stats.usage(),
    }


async def test_a_write_that_fails_ends_the_turn_and_changes_nothing(project: Path) -> None:
    import resource

    from tests.agent.conftest import Harness

    big = "".join(f"line {i}\n" for i in range(30_000))  # about 250 kB
    (project / "big.txt").write_text(big)
    h = Harness(project, [sr("big.txt", "line 0", "first line")])  # no undo store: the apply itself fails
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))  # as if the disk were full
    try:
        result = await h.agent.run("change the first line of big.txt")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert result.status == "failed"
    assert "File too large" in result.message and "No file was changed" in result.message
    assert (project / "big.txt").read_text() == big
    assert [c["status"] for c in h.events.items("file_change")] == ["failed"]


async def test_a_turn_over_its_time_ends_with_the_reason(harness, project: Path) -> None:
    h = harness([Reply("x" * 400, delay_s=0.05)], max_turn_s=0.3)
    result = await h.agent.run("Rename say_hello to greet in greet.py.")
    assert not result.ok and "time limit of 0.3 s" in result.message
    assert h.model.cancels == 1  # the server was told to stop generating


async def test_a_turn_over_its_output_tokens_ends_with_the_reason(harness, project: Path) -> None:
    replies = ["READ greet.py\n" + "x" * 400, "READ README.md\n" + "y" * 400, "never asked"]
    h = harness(replies, max_turn_output_tokens=150)
    result = await h.agent.run("Rename say_hello to greet in greet.py.")
    assert not result.ok and "150 output tokens" in result.message
    assert len(h.model.requests) == 2
    assert h.model.requests[1].max_output_tokens < 150  # the last call may not overshoot either


def spending(h, tokens: int, *, heal: bool) -> None:
    """The first reply of `h`'s model reports `tokens` output tokens, as a healing step's candidates
    (`heal`) or as the model's own reply."""
    respond, calls = h.model.respond, []

    async def spent(request):
        calls.append(request)
        async for event in respond(request):
            if len(calls) == 1 and isinstance(event, Finished):
                extra = {"heal_tokens": tokens} if heal else {}
                event.usage = {**event.usage, "output_tokens": tokens}
                event.timings = {**event.timings, **extra}
            yield event

    h.model.respond = spent


async def test_a_healing_steps_candidates_do_not_spend_the_turns_output_tokens(project: Path, tmp_path: Path):
    edit = sr("greet.py", "def say_hello(name):", "def greet(name):")
    for heal in (True, False):
        root = tmp_path / f"heal-{heal}"
        shutil.copytree(project, root)
        h = Harness(root, ["READ README.md", edit, "Done."], max_turn_output_tokens=150)
        spending(h, 5000, heal=heal)
        result = await h.agent.run("Rename say_hello to greet in greet.py.")
        if heal:  # bounded by the heal's own budget: the turn goes on
            assert result.ok, result.message
            assert (root / "greet.py").read_text().startswith("def greet(name):")
        else:  # the model's own reply spends the turn's tokens
            assert not result.ok and "150 output tokens" in result.message
            assert len(h.model.requests) == 1


async def test_a_reply_caught_in_a_loop_is_stopped_and_its_edit_before_the_loop_applied(
    harness, project: Path
):
    # Seen in whiz bench agent (fast, EditEval 19): the 0.5B ended its edit and then wrote
    # ">>>>>>> REPLACE" over and over, 70 s to the output limit, and the turn ran out of time.
    edit = sr("greet.py", "def say_hello(name):", "def greet(name):")
    looping = edit + ">>>>>>> REPLACE\n" * 300
    h = harness([Reply(looping, chunk_chars=16)])
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    assert h.model.cancels == 1  # the server was told to stop
    assert (project / "greet.py").read_text().startswith("def greet(name):")
    assert any("loop" in e["message"] for e in h.events.items("error"))
    reply = [i for i in h.agent.items if i.get("role") == "assistant"][0]["content"]
    assert reply == edit  # the conversation keeps the reply without its loop


async def test_a_loop_within_one_line_is_stopped_while_the_line_streams(harness, project: Path):
    # Seen in whiz bench agent (fast, EditEval 15): `eighth_notes = ['o|', 'o|', ...` on one line
    # to the output limit, 122 s; no line ever ended, so no line repeated.
    same = "greet.py\n```python\ndef say_hello(name):\n    notes = [" + "'o|', " * 400
    fixed = 'greet.py\n```python\ndef greet(name):\n    return "Hello, " + name\n```\n'
    h = harness([Reply(same, chunk_chars=8), fixed])
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    assert h.model.cancels == 1 and any("loop" in e["message"] for e in h.events.items("error"))
    reply = [i for i in h.agent.items if i.get("role") == "assistant"][0]["content"]
    assert reply.endswith("notes = ['o|', ")  # kept up to the loop's first copy


async def test_a_reply_that_writes_the_instructions_back_is_not_acted_on(harness, project: Path):
    # Seen in whiz bench agent (fast, EditEval 4 and 6): told its reply changed nothing, the 0.5B
    # wrote the instructions back, and their example READ, LIST and GREP lines ran on path/to/.
    from whiz.agent.context.prompt import TEXT_ACTIONS

    echo = "To change the file, write the file's path on its own line:\n\n" + TEXT_ACTIONS.split("\n", 2)[2]
    h = harness(
        [echo.format(run="RUN shell command"), sr("greet.py", "def say_hello(name):", "def greet(name):")]
    )
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    retry = h.model.requests[1]
    assert retry.retry and all("READ path/to" not in str(i.get("content")) for i in retry.items)
    assert "instructions back" in retry.items[-1]["content"]
    assert not h.events.items("tool_call") and not h.events.items("command_execution")  # no example ran
    assert (project / "greet.py").read_text().startswith("def greet(name):")


async def test_a_reply_that_writes_back_the_message_it_answers_is_no_answer(harness, project: Path):
    # Seen in whiz bench agent (fast, EditEval 47): told "Your reply has code but no edit, ...", the
    # 0.5B wrote the second sentence of that back, and the turn ended on it as its answer.
    two_blocks = "```python\ndef greet(name):\n    pass\n```\n\n```python\nprint(greet('x'))\n```\n"

    def written_back(request):
        return request.items[-1]["content"].split(". ", 1)[1]  # the feedback's second sentence

    h = harness([two_blocks, written_back, sr("greet.py", "def say_hello(name):", "def greet(name):")])
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.ok, result.message
    retry = h.model.requests[2]
    assert retry.retry and "wrote my last message back" in retry.items[-1]["content"]
    assert (project / "greet.py").read_text().startswith("def greet(name):")


async def test_a_turn_whose_edits_keep_failing_the_tests_stops_after_three(harness, project: Path):
    # Seen in whiz bench agent (fast, EditEval 6 and 15): every turn that passed did so at its first
    # test run, while turns whose edits kept failing went on for 11 failing runs, or 240 s.
    (project / "check.py").write_text("import greet\nassert greet.greet('a') == 'Hello, a'\n")
    tries = [f'greet.py\n```python\ndef greet(name):\n    return "Hi {n}, " + name\n```\n' for n in range(5)]
    h = harness(tries, test_cmd="python check.py")
    result = await h.agent.run("Rename say_hello to greet in greet.py")
    assert result.status == "failed" and "failed after 3 edits" in result.message
    assert "undo" in result.message and len(h.model.requests) == 3
    assert [c["status"] for c in h.events.items("command_execution")] == ["failed"] * 3
