"""Reading actions out of replies: text commands, edit blocks, unnamed rewrites, and function calls."""

from __future__ import annotations

from pathlib import Path

from tests.agent.conftest import GREET, Harness, sr
from whiz.agent.editing.edits import SearchReplace, WholeFile
from whiz.agent.formats import text_actions, tool_action, unparsed_calls
from whiz.agent.models.seam import ModelToolCall
from whiz.agent.tools import ApplyEdits, ListFiles, Malformed, ReadFile, RunCommand, SearchText


def test_commands_one_a_line() -> None:
    reply = "Let me look.\nREAD src/app.py 10-40\n- LIST src\n`GREP def main`\n$ RUN pytest -q\nREAD b.py"
    assert text_actions(reply) == [
        ReadFile("src/app.py", 10, 40),
        ListFiles("src"),
        SearchText("def main"),
        RunCommand("pytest -q"),
        ReadFile("b.py"),
    ]


def test_commands_inside_code_are_not_actions() -> None:
    reply = "Run it like this:\n```\nRUN make\nREAD x\n```\nThat is all."
    assert text_actions(reply) == []


def test_edit_blocks_come_first_as_one_action() -> None:
    reply = "READ other.py\n" + sr("a.py", "x = 1", "x = 2") + sr("a.py", "y = 1", "y = 2")
    actions = text_actions(reply)
    assert actions[0] == ApplyEdits(
        [SearchReplace("a.py", "x = 1\n", "x = 2\n"), SearchReplace("a.py", "y = 1\n", "y = 2\n")]
    )
    assert actions[1] == ReadFile("other.py")


def test_a_broken_block_is_malformed_with_help() -> None:
    [action] = text_actions("a.py\n<<<<<<< SEARCH\nx = 1\n")
    assert isinstance(action, Malformed) and action.is_edit


def test_an_unnamed_fence_rewrites_the_focus_file_only_when_it_is_that_file() -> None:
    new = GREET.replace("say_hello", "greet")
    [action] = text_actions(f"Here it is:\n```python\n{new}```\n", focus=("greet.py", GREET))
    assert action == ApplyEdits([WholeFile("greet.py", new)])
    # A snippet is an illustration, not the file.
    assert text_actions("For example:\n```\nprint(1)\n```\n", focus=("greet.py", GREET)) == []


def test_tool_calls_become_actions() -> None:
    assert tool_action(ModelToolCall("c1", "read_file", '{"path": "a.py", "start_line": 3}')) == ReadFile(
        "a.py", 3, None
    )
    edit = tool_action(ModelToolCall("c2", "edit_file", '{"path": "a.py", "old_text": "x", "new_text": "y"}'))
    assert edit == ApplyEdits([SearchReplace("a.py", "x", "y")])
    missing = tool_action(ModelToolCall("c3", "edit_file", '{"path": "a.py"}'))
    assert isinstance(missing, Malformed) and "old_text" in missing.message and missing.is_edit


def test_calls_left_in_the_text_are_counted_once_each() -> None:
    unclosed = '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}\n</tool_call>'
    assert unparsed_calls("I will read it.\n" + unclosed) == 1
    assert unparsed_calls('```json\n{"name": "read_file", "arguments": {}\n```\n{ "name" : "x"') == 2
    assert unparsed_calls("Done: renamed foo to bar.") == 0


async def test_a_rewrite_that_drops_most_of_the_file_is_refused(project: Path) -> None:
    long = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(12))
    (project / "long.py").write_text(long)
    fragment = "long.py\n```\nLIMIT = 100\n\n\ndef f0():\n    return LIMIT\n```\n"
    h = Harness(project, ["READ long.py", fragment, "ok"])
    await h.agent.run("make f0 return 100")
    assert (project / "long.py").read_text() == long
    assert "would delete most of the file" in h.model.requests[2].items[-1]["content"]


async def test_a_whole_file_that_is_one_of_its_functions_replaces_that_function(project: Path) -> None:
    long = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(12))
    (project / "long.py").write_text(long)
    fragment = "long.py\n```\ndef f0():\n    return 100\n```\n"
    h = Harness(project, ["READ long.py", fragment, "ok"])
    result = await h.agent.run("make f0 return 100")
    assert result.ok, result.message
    assert (project / "long.py").read_text() == long.replace("return 0\n", "return 100\n", 1)


async def test_a_rewrite_with_elided_code_is_refused(project: Path) -> None:
    fragment = "greet.py\n```\ndef greet(name):\n    return 'Hello, ' + name\n\n# ... rest of the code\n```\n"
    h = Harness(project, [fragment, "ok"])
    await h.agent.run("rename say_hello in greet.py")
    assert (project / "greet.py").read_text() == GREET
    assert "leaves code out" in h.model.requests[1].items[-1]["content"]


async def test_quoting_a_file_unchanged_is_an_answer(project: Path) -> None:
    h = Harness(project, [f"It reads:\n```\n{GREET}```\n"])
    result = await h.agent.run("show me greet.py")
    assert result.ok and result.changed == [] and h.events.items("file_change") == []
