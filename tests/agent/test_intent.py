"""Never an empty success: code with no usable edit is the named file or sent back, and a change
request that ends with no change fails."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.intent import asks_for_change, named_paths

from .conftest import sr

GAME = "import random\n\n\ndef main():\n    print(random.choice('ab'))\n\n\nmain()\n"


async def test_a_fenced_block_with_no_path_becomes_the_file_the_task_names(harness, project: Path):
    h = harness([f"Here is the game:\n\n```python\n{GAME}```\n"])
    result = await h.agent.run("Write a complete, playable game in Python in snake.py.")
    assert result.ok and result.changed == ["snake.py"]
    assert (project / "snake.py").read_text() == GAME


async def test_a_block_indented_in_a_list_item_is_the_file_without_that_indent(harness, project: Path):
    indented = "".join(f"   {line}\n" if line else "\n" for line in GAME.splitlines())
    h = harness([f"1. Create the game:\n   ```python\n{indented}   ```\n"])
    result = await h.agent.run("Write a complete, playable game in Python in snake.py.")
    assert result.ok and (project / "snake.py").read_text() == GAME


async def test_code_without_an_edit_is_sent_back_saying_what_was_missing(harness, project: Path):
    # Two files named: a bare block cannot say which one it is.
    h = harness(["```python\nprint('hi')\n```", f"snake.py\n```python\n{GAME}```"])
    result = await h.agent.run("Write snake.py and a README.md for it.")
    assert result.ok and (project / "snake.py").read_text() == GAME
    told = h.model.requests[1].items[-1]["content"]
    assert "code but no edit" in told


async def test_a_bare_function_replaces_that_function_where_it_is_defined(harness, project: Path):
    # The task names the function, not its file: the 0.5B often answers with the fixed function alone.
    fixed = 'def say_hello(name):\n    return "Hello, " + name + "!"\n'
    h = harness([f"Here is the corrected function:\n\n```python\n{fixed}```\n"])
    result = await h.agent.run("Fix say_hello so that it ends the greeting with an exclamation mark.")
    assert result.ok and result.changed == ["greet.py"]
    text = (project / "greet.py").read_text()
    assert text.startswith(fixed) and 'print(say_hello("world"))' in text  # main is kept


async def test_one_function_of_the_named_file_does_not_overwrite_the_file(harness, project: Path):
    fixed = 'def say_hello(name):\n    return "Hi, " + name\n'
    h = harness([f"```python\n{fixed}```"])
    result = await h.agent.run("In greet.py, change the greeting to Hi.")
    assert result.ok and "def main():" in (project / "greet.py").read_text()


async def test_a_change_request_answered_in_words_fails_with_the_reason(harness, project: Path):
    h = harness(["The function looks fine to me."])
    result = await h.agent.run("Fix the bug in say_hello.")
    assert not result.ok and "asked for a change, but none was made" in result.message


async def test_a_question_answered_in_words_is_done(harness):
    h = harness(["It prints a greeting.\n\n```python\nprint(say_hello('world'))\n```"])
    result = await h.agent.run("What does main do?")
    assert result.ok and result.changed == []


def test_what_counts_as_asking_for_a_change():
    assert asks_for_change("Fix the bug in mean so the tests pass.")
    assert asks_for_change("write tests for greet.py")
    assert not asks_for_change("Why does the test fail?")
    assert not asks_for_change("Explain what main() does.")
    assert not asks_for_change("say hi")
    assert named_paths("Write a Snake game using Pygame in snake.py. Call pygame.init first, e.g.") == [
        "snake.py"
    ]


async def test_a_turn_that_stops_on_failing_tests_has_failed(harness, project: Path):
    edit = sr("greet.py", '    return "Hello, " + name', '    return "Hi " + name')
    h = harness([edit, *["The tests expect something else; I cannot tell what."] * 3], test_cmd="false")
    result = await h.agent.run("Change the greeting in say_hello.")
    assert not result.ok and "still fail" in result.message
