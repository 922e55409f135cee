"""A fix of one function the task names is asked for as that function, written once, and the
function alone in a fence (with or without its file's path) replaces it, the rest of the file
kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.conftest import GREET
from whiz.agent.named_fix import named_fix
from whiz.agent.project.workspace import Workspace

FIXED = 'def say_hello(name):\n    return "Hello, " + name + "!"'


async def test_the_named_function_is_asked_for_whole_and_predicted_as_it_is(harness, project: Path) -> None:
    h = harness([f"```python\n{FIXED}\n```"])
    result = await h.agent.run("Fix the bug in the function say_hello in greet.py")
    assert result.ok, result.message
    # Written once: the function fixed, and main() kept as it was.
    assert (project / "greet.py").read_text() == GREET.replace("+ name\n", '+ name + "!"\n')
    request = h.model.requests[0]
    assert (
        request.items[0]["content"].rstrip().endswith("no file path before it and no SEARCH/REPLACE block.")
    )
    old = GREET[: GREET.index("\n\n\n")]
    assert request.prediction == f"```python\n{old}\n```"


async def test_the_function_under_its_files_path_replaces_only_that_function(harness, project: Path) -> None:
    # Written as "the file" though it is one function of it: main() must not be deleted.
    h = harness([f"greet.py\n```python\n{FIXED}\n```"])
    result = await h.agent.run("Fix the bug in the function say_hello in greet.py")
    assert result.ok, result.message
    assert (project / "greet.py").read_text() == GREET.replace("+ name\n", '+ name + "!"\n')


async def test_a_task_that_names_no_one_function_is_asked_as_before(harness, project: Path) -> None:
    h = harness(["Nothing to change."])
    await h.agent.run("Fix the bug in greet.py")
    assert "SEARCH/REPLACE" not in h.model.requests[0].items[0]["content"]
    assert h.model.requests[0].prediction == GREET  # the file, as for any turn


@pytest.mark.parametrize(
    "task",
    [
        "Fix the bug in greet.py",  # no function named
        "Fix say_hello and main.",  # two
        "Add a function say_bye beside say_hello.",  # something new
        "Rename say_hello to greet.",  # not a fix
        "Why does say_hello fail?",  # a question
    ],
)
def test_only_a_fix_of_one_named_function_is_one(project: Path, task: str) -> None:
    assert named_fix(Workspace(project), task) is None


def test_a_name_two_files_define_is_no_named_fix(project: Path) -> None:
    ws = Workspace(project)
    assert named_fix(ws, "say_hello is wrong: fix it").name == "say_hello"
    (project / "other.py").write_text("def say_hello():\n    pass\n")
    assert named_fix(ws, "say_hello is wrong: fix it") is None


async def test_the_function_written_back_unchanged_is_told_it_is_no_change(harness, project: Path) -> None:
    old = GREET[: GREET.index("\n\n\n")]
    h = harness([f"```python\n{old}\n```", f"```python\n{FIXED}\n```"])
    result = await h.agent.run("Fix the bug in the function say_hello in greet.py")
    assert result.ok, result.message
    # Not mistaken for the message written back (its fence line is no line of the message).
    (error,) = h.events.items("error")
    assert error["message"].startswith("the reply wrote the code back unchanged")


STACK = """class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        return self.items[0]


def empty():
    return Stack()
"""
POP = "    def pop(self):\n        return self.items[0]"
POP_FIXED = "def pop(self):\n    return self.items.pop()"


@pytest.mark.parametrize(
    "task", ["Fix the bug in the method Stack.pop in stack.py", "Fix the bug in the function pop in stack.py"]
)
async def test_a_named_method_is_asked_for_alone_and_put_back_in_its_class(
    harness, project: Path, task: str
) -> None:
    (project / "stack.py").write_text(STACK)
    h = harness([f"```python\n{POP_FIXED}\n```"])
    result = await h.agent.run(task)
    assert result.ok, result.message
    # The method replaced inside its class; the rest of the file kept.
    fixed = STACK.replace("return self.items[0]", "return self.items.pop()")
    assert (project / "stack.py").read_text() == fixed
    request = h.model.requests[0]
    assert "The method `Stack.pop` above is wrong" in request.items[0]["content"]
    assert request.prediction == "```python\ndef pop(self):\n    return self.items[0]\n```"


def test_a_method_two_classes_have_is_no_named_fix(project: Path) -> None:
    (project / "stack.py").write_text(STACK)
    ws = Workspace(project)
    assert named_fix(ws, "Fix the bug in the method Stack.pop").qualname == "Stack.pop"
    (project / "queue.py").write_text("class Queue:\n    def pop(self):\n        return None\n")
    assert named_fix(ws, "Fix the bug in the method Stack.pop") is None
    assert named_fix(ws, "Fix the bug in the function pop") is None


async def test_a_method_written_back_alone_is_no_change_and_leaves_the_class(harness, project: Path) -> None:
    (project / "stack.py").write_text(STACK)
    h = harness([f"```python\n{POP.replace('    ', '', 1).replace('        ', '    ')}\n```", "Done."])
    await h.agent.run("Fix the bug in the method Stack.pop in stack.py")
    assert (project / "stack.py").read_text() == STACK  # not the method written over the file


async def test_a_class_written_with_only_the_fixed_method_keeps_its_other_methods(
    harness, project: Path
) -> None:
    (project / "stack.py").write_text(STACK)
    reply = "```python\nclass Stack:\n    def pop(self):\n        return self.items.pop()\n```"
    h = harness([reply])
    result = await h.agent.run("Fix the bug in the method Stack.pop in stack.py")
    assert result.ok, result.message
    fixed = STACK.replace("return self.items[0]", "return self.items.pop()")
    assert (project / "stack.py").read_text() == fixed  # __init__ and push kept
