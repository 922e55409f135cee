"""What an edit wrote is checked before the turn ends; problems go back to the model once."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.checks import check_files
from whiz.agent.project.workspace import Workspace

from .conftest import sr


async def test_an_edit_with_a_syntax_error_is_sent_back_once(harness, project: Path):
    broken = sr("greet.py", '    return "Hello, " + name', '    return ("Hello, " + name')
    fixed = sr("greet.py", '    return ("Hello, " + name', '    return "Hi, " + name')
    h = harness([broken, fixed], check_edits=True)
    result = await h.agent.run("Change the greeting in say_hello to Hi.")
    assert result.ok and 'return "Hi, " + name' in (project / "greet.py").read_text()
    told = h.model.requests[1].items[-1]["content"]
    assert "greet.py:2" in told and "Fix them" in told


async def test_errors_go_back_only_once(harness, project: Path):
    broken = sr("greet.py", '    return "Hello, " + name', "    return greeting + name")
    still = sr("greet.py", "    return greeting + name", "    return salutation + name")
    h = harness([broken, still, "unused"], check_edits=True)
    result = await h.agent.run("Change the greeting in say_hello.")
    assert result.ok and len(h.model.requests) == 2  # told once, then the turn ends


def test_undefined_names_and_other_languages(tmp_path: Path):
    (tmp_path / "a.py").write_text("import os\n\n\ndef f():\n    return os.sep + missing_name\n")
    (tmp_path / "b.js").write_text("function f( {\n  return 1;\n}\n")
    (tmp_path / "c.js").write_text("function f() {\n  return 1;\n}\n")
    problems = check_files(Workspace(tmp_path), ["a.py", "b.js", "c.js"])
    assert problems[0] == "a.py:5: undefined name 'missing_name'"
    assert [p for p in problems if p.startswith("b.js:1")] and not [p for p in problems if "c.js" in p]


async def test_words_after_the_check_do_not_end_the_turn_before_the_tests_run(harness, project: Path):
    # Seen on EditEval with the 0.5B: told its edit left a syntax error, it explained the error
    # instead of fixing it, and the turn reported "completed" with the tests never run.
    (project / "check.py").write_text("import greet\nassert greet.say_hello('a') == 'Hi, a'\n")
    broken = sr("greet.py", '    return "Hello, " + name', '    return ("Hi, " + name')
    fixed = sr("greet.py", '    return ("Hi, " + name', '    return "Hi, " + name')
    words = "The syntax error is due to the unclosed parenthesis."
    h = harness([broken, words, fixed], check_edits=True, test_cmd="python check.py")
    result = await h.agent.run("Change the greeting in say_hello to Hi.")
    assert result.ok and "the tests pass" in result.message
    told = h.model.requests[2].items[-1]["content"]
    assert "The tests failed" in told and "SyntaxError" in told


async def test_words_again_after_failing_tests_fail_the_turn(harness, project: Path):
    (project / "check.py").write_text("import greet\nassert greet.say_hello('a') == 'Hi, a'\n")
    broken = sr("greet.py", '    return "Hello, " + name', '    return ("Hi, " + name')
    words = ["It is a syntax error.", "It is still a syntax error.", "Still.", "The test is wrong."]
    h = harness([broken, *words], check_edits=True, test_cmd="python check.py")
    result = await h.agent.run("Change the greeting in say_hello to Hi.")
    assert result.status == "failed" and "still fail" in result.message
    # Words while the tests fail were sent back twice (an edit is owed), then the turn ended.
    assert "Your last reply made no edit" in h.model.requests[-1].items[-1]["content"]
    assert [c["status"] for c in h.events.items("command_execution")] == ["failed"]


async def test_after_failing_tests_the_model_hears_what_failed_not_all_they_printed(harness, project: Path):
    # A run that opens with pages of warnings: the model read them as the problem.
    noise = "".join(f"print('DeprecationWarning: option {i} is deprecated')\n" for i in range(40))
    (project / "check.py").write_text(
        noise + "import greet\ngot = greet.say_hello('a')\nassert got == 'Hi, a', got\n"
    )
    wrong = sr("greet.py", '    return "Hello, " + name', '    return "Hi " + name')
    fixed = sr("greet.py", '    return "Hi " + name', '    return "Hi, " + name')
    h = harness([wrong, fixed], test_cmd="python check.py")
    result = await h.agent.run("Change the greeting in say_hello to Hi.")
    assert result.ok
    told = h.model.requests[1].items[-1]["content"]
    assert "AssertionError: Hi a" in told and "Exit code 1." in told
    assert "Deprecat" not in told and str(project) not in told
    ran = h.events.items("command_execution")
    assert "option 39 is deprecated" in ran[0]["aggregated_output"]  # the user still sees it all
