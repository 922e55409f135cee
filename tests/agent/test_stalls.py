"""`ToolStall` alone: which calls make progress toward the task, when the turn's calls end, and
the answer it ends with."""

from __future__ import annotations

from whiz.agent.stalls import ToolStall

TOOLS = ["everything__echo", "everything__get-sum", "everything__get-annotated-message", "fs__read_file"]
ECHO_TASK = (
    "Use the everything__echo tool to echo the message: hello from whiz. Then tell me what it returned."
)


def ran(stall: ToolStall, tool: str, arguments: dict, text: str = "done", ok: bool = True) -> bool:
    """Ask the policy, and make the call if it lets it through; whether it did."""
    if stall.before(tool, arguments) is not None:
        return False
    stall.after(tool, arguments, ok=ok, text=text)
    return True


def echoed() -> ToolStall:
    stall = ToolStall(ECHO_TASK, TOOLS)
    assert ran(stall, "everything__echo", {"message": "hello from whiz"}, "Echo: hello from whiz")
    return stall


def test_the_tool_the_task_names_is_asked_for_in_full_or_by_its_own_name():
    assert ToolStall(ECHO_TASK, TOOLS).asked == {"everything__echo"}
    assert ToolStall("Use the echo tool on 'hi'", TOOLS).asked == {"everything__echo"}
    assert ToolStall("Add get-sum to the list", TOOLS).asked == {"everything__get-sum"}
    assert ToolStall("Use get-summary, then echoing", TOOLS).asked == set()  # inside other words


def test_once_the_named_tool_answered_an_unasked_call_ends_the_turn_before_it_runs():
    stall = echoed()
    stop = stall.before(
        "everything__get-annotated-message", {"messageType": "success", "includeImage": False}
    )
    assert stop is not None
    assert stop.reason == (
        "everything__get-annotated-message was not called: the task asked for everything__echo, "
        "which answered, and this call uses nothing the task or a result gave"
    )
    assert [u.text for u in stop.results] == ["Echo: hello from whiz"]
    assert stop.item()["answered_from"] == ["everything__echo"]


def test_after_the_named_tool_answered_a_call_that_uses_its_result_goes_on():
    stall = ToolStall("Use fs__read_file on notes/index.txt, then show me the file it points to", TOOLS)
    assert ran(stall, "fs__read_file", {"path": "notes/index.txt"}, "see notes/plan.md")
    assert stall.before("everything__echo", {"message": "notes/plan.md"}) is None
    assert stall.before("everything__get-sum", {"a": 4, "b": 9}) is not None


def test_after_the_named_tool_answered_another_tool_may_do_the_rest_of_the_task():
    stall = ToolStall("Use everything__echo to echo hi, then add 2 and 3", TOOLS)
    assert ran(stall, "everything__echo", {"message": "hi"}, "Echo: hi")
    assert stall.before("everything__get-sum", {"a": 2, "b": 3}) is None


def test_the_named_tool_again_goes_on_with_values_from_the_task_not_made_up_or_the_same():
    stall = echoed()
    assert ran(stall, "everything__echo", {"message": "hello whiz"})
    assert stall.before("everything__echo", {"message": "goodbye moon"}) is not None
    stop = stall.before("everything__echo", {"message": "hello from whiz"})
    assert stop is not None and "already called with these arguments" in stop.reason


def test_with_no_tool_named_one_idle_call_is_let_through_and_the_second_ends_the_turn():
    stall = ToolStall("What does my shop note say?", TOOLS)
    assert ran(stall, "fs__read_file", {"path": "shop"}, "buy milk")
    assert ran(stall, "everything__get-sum", {"a": 4, "b": 9})  # made up: one look around
    stop = stall.before("everything__get-annotated-message", {"messageType": "error"})
    assert stop is not None and "come from neither the task nor a result" in stop.reason
    assert [u.tool for u in stop.results] == ["fs__read_file"]


def test_a_repeated_call_is_idle_even_with_no_tool_named():
    stall = ToolStall("What does my shop note say?", TOOLS)
    assert ran(stall, "fs__read_file", {"path": "shop"}, "buy milk")
    assert ran(stall, "fs__read_file", {"path": "shop"}, "buy milk")  # once: the toolbox answers it
    assert stall.before("fs__read_file", {"path": "shop"}) is not None


def test_a_call_that_makes_progress_gives_the_patience_back():
    stall = ToolStall("Read the notes shop, home and work", TOOLS)
    for i, name in enumerate(["shop", "home", "work"]):
        assert ran(stall, "everything__get-sum", {"a": i, "b": 50 + i})  # made up, let through
        assert ran(stall, "fs__read_file", {"path": name}, f"the {name} note")
    assert stall.idle == 0 and len(stall.useful) == 3


def test_a_value_taken_from_a_result_makes_progress_even_if_that_call_made_none():
    stall = ToolStall("Which note holds my plans?", TOOLS)
    assert ran(stall, "everything__get-sum", {"a": 1, "b": 2}, "see plans-2026.txt")
    assert ran(stall, "fs__read_file", {"path": "plans-2026.txt"}, "ski trip")  # uses that result
    assert stall.idle == 0 and [u.tool for u in stall.useful] == ["fs__read_file"]


def test_the_workspace_path_is_a_known_source_of_values():
    stall = ToolStall("Which files are there?", TOOLS, where="/home/ann/project")
    assert ran(stall, "fs__read_file", {"path": "/home/ann/project"}, "greet.py")
    assert stall.useful and stall.idle == 0


def test_with_nothing_useful_yet_the_stop_has_no_result_to_answer_with():
    stall = ToolStall("Tidy up", TOOLS)
    assert ran(stall, "everything__get-sum", {"a": 4, "b": 9})
    stop = stall.before("everything__get-annotated-message", {"messageType": "error"})
    assert stop is not None and stop.results == ()


def test_malformed_calls_and_tools_not_on_offer_count_for_nothing():
    stall = echoed()
    assert stall.before("everything__nothing", {"x": 1}) is None  # the toolbox says it is unknown
    stall = ToolStall("What does my shop note say?", TOOLS)
    for _ in range(3):
        assert stall.before("everything__get-sum", {"a": "four"}) is None
        stall.after("everything__get-sum", {"a": "four"}, ok=False, text="bad", malformed=True)
    assert stall.idle == 0


def test_a_failed_call_of_the_named_tool_lets_the_model_try_it_another_way():
    stall = ToolStall(ECHO_TASK, TOOLS)
    assert ran(stall, "everything__echo", {"msg": "hello from whiz"}, "error: message required", ok=False)
    assert stall.before("everything__echo", {"message": "hello from whiz"}) is None
    assert stall.idle == 0 and stall.useful == []


def test_the_answer_is_the_words_when_they_carry_the_result_else_the_result_is_added():
    stall = echoed()
    assert stall.answer("It returned: Echo: hello from whiz.") == "It returned: Echo: hello from whiz."
    assert stall.answer("It worked.") == "It worked.\n\neverything__echo returned:\nEcho: hello from whiz"
    assert stall.answer("  ") == "everything__echo returned:\nEcho: hello from whiz"
    assert ToolStall("Tidy up", TOOLS).answer("Nothing to do.") == "Nothing to do."


def test_the_model_is_shown_the_last_useful_result_again_cut_to_a_bound():
    stall = ToolStall("What does my shop note say?", TOOLS)
    assert ran(stall, "fs__read_file", {"path": "shop"}, "buy milk\n" + "x" * 5000)
    assert ran(stall, "everything__get-sum", {"a": 4, "b": 9})
    stop = stall.before("everything__get-sum", {"a": 5, "b": 9})
    assert stop is not None
    told = stop.told()
    assert "fs__read_file returned:\nbuy milk" in told and told.count("x") < 2100
    assert told.endswith("Answer the task now, in words, with what the tools returned.")


# -- the agent's own tools: read_file, list_files, search_text, run_command ---------------------------

GREET_V1 = "greet.py:\ndef say_hello(name): ..."
GREET_V2 = "greet.py:\ndef greet(name): ..."


def test_the_agents_own_tools_are_judged_too():
    stall = ToolStall("What does greet.py do?", [])
    assert ran(stall, "read_file", {"path": "greet.py"}, GREET_V1)
    assert ran(stall, "read_file", {"path": "greet.py"}, GREET_V1)  # one look again is let through
    stop = stall.before("read_file", {"path": "greet.py"})
    assert stop is not None and "already called with these arguments" in stop.reason
    assert [u.tool for u in stop.results] == ["read_file"]


def test_a_read_after_an_edit_is_no_repeat_when_the_file_changed():
    stall = ToolStall("Rename say_hello in greet.py", [])
    assert ran(stall, "read_file", {"path": "greet.py"}, GREET_V1)
    assert ran(stall, "read_file", {"path": "greet.py"}, GREET_V1)
    assert stall.idle == 1
    stall.changed(["greet.py"])  # an edit applied: what was read may read otherwise now
    assert stall.idle == 0
    assert ran(stall, "read_file", {"path": "greet.py"}, GREET_V2)
    assert stall.idle == 0 and stall.useful[-1].text == GREET_V2


def test_a_read_after_an_edit_elsewhere_that_returns_the_same_is_a_repeat():
    stall = ToolStall("Rename say_hello in greet.py", [])
    assert ran(stall, "read_file", {"path": "greet.py"}, GREET_V1)
    stall.changed(["other.py"])
    assert ran(stall, "read_file", {"path": "greet.py"}, GREET_V1)  # let through: it may have changed
    assert stall.idle == 1  # but it had not: the same call, the same result
    assert stall.before("read_file", {"path": "greet.py"}) is not None


def test_the_same_command_with_the_same_output_is_a_repeat_and_one_that_changed_things_is_not():
    stall = ToolStall("Make the tests pass", [])
    assert ran(stall, "run_command", {"command": "pytest -q"}, "1 failed")
    assert ran(stall, "run_command", {"command": "pytest -q"}, "1 failed")
    assert stall.before("run_command", {"command": "pytest -q"}) is not None
    stall = ToolStall("Make the tests pass", [])
    assert ran(stall, "run_command", {"command": "pytest -q"}, "1 failed")
    assert ran(stall, "run_command", {"command": "sed -i s/a/b/ app.py"}, "")  # a command may change files
    assert stall.before("run_command", {"command": "pytest -q"}) is None
    stall.after("run_command", {"command": "pytest -q"}, ok=True, text="1 passed")
    assert stall.idle == 0


def test_commands_are_judged_by_repeats_only_not_by_where_their_words_come_from():
    stall = ToolStall("Tidy up", [])
    for command in ("ls -la", "git status", "python -V"):
        assert ran(stall, "run_command", {"command": command}, f"out of {command}")
    assert stall.idle == 0


def test_the_workspaces_files_are_known_values_and_made_up_paths_are_not():
    stall = ToolStall("Why does it crash?", [], where="/home/ann/project\nsrc/app.py\nREADME.md")
    assert ran(stall, "read_file", {"path": "src/app.py"}, "import os")
    assert ran(stall, "read_file", {"path": "lib/helpers.py"}, "not found", ok=False)  # made up
    stop = stall.before("read_file", {"path": "lib/util.py"})
    assert stop is not None and "come from neither the task nor a result" in stop.reason


def test_a_long_result_added_to_the_answer_is_cut_to_the_same_bound():
    stall = ToolStall("What does big.py hold?", [])
    assert ran(stall, "read_file", {"path": "big.py"}, "big.py:\n" + "x = 1\n" * 2000)
    answer = stall.answer("It sets x.")
    assert answer.startswith("It sets x.\n\nread_file returned:\nbig.py:") and answer.endswith("…")
    assert len(answer) < 2100
