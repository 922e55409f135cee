from __future__ import annotations

from pathlib import Path

import pytest

from whiz.agent.editing.rename import exact_rename, requested
from whiz.agent.project.workspace import Workspace
from whiz.environments.secret_rules import SecretFiles

GREET = '''def say_hello(name):
    """Say hello (say_hello greets)."""
    return "Hello, " + name + "!"


def main():
    for person in ["Ada", "Linus"]:
        print(say_hello(person))  # say_hello once per person
'''


@pytest.mark.parametrize(
    "task",
    [
        "In greet.py, rename the function say_hello to greet_person, updating every call to it.",
        "Rename say_hello to greet_person in greet.py.",
        "Rename the function `say_hello` in greet.py to `greet_person`",
        "rename say_hello() to greet_person() and update all references",
        "In `greet.py`, rename say_hello to greet_person and update every call to it too.",
    ],
)
def test_a_task_that_only_renames_gives_the_two_names(task: str) -> None:
    assert requested(task) == ("say_hello", "greet_person")


@pytest.mark.parametrize(
    "task",
    [
        "Rename say_hello to greet_person and make it print in upper case.",
        "Rename say_hello to greet_person, then add a docstring.",
        "Why would I rename say_hello to greet_person?",
        "Rename the file greet.py to hello.py.",
        "Rename get to fetch.",  # a method of dict: its tokens are other code's too
        "Rename say_hello to class.",
    ],
)
def test_a_task_that_asks_for_more_or_other_than_a_rename_is_the_models(task: str) -> None:
    assert requested(task) is None


def test_every_use_in_code_is_renamed_and_strings_and_comments_are_left(tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text(GREET)
    (tmp_path / "app.py").write_text(
        "from greet import say_hello\nimport greet\n\nsay_hello('x')\ngreet.say_hello('y')\n"
    )
    (tmp_path / "other.py").write_text("def unrelated():\n    return 1\n")
    done = exact_rename(Workspace(tmp_path), "Rename say_hello to greet_person.")
    assert done is not None and done.uses == {"app.py": 3, "greet.py": 2}
    files = {e.path: e.content for e in done.edits}
    assert files["greet.py"] == GREET.replace("def say_hello", "def greet_person").replace(
        "print(say_hello", "print(greet_person"
    )
    assert (
        files["app.py"]
        == "from greet import greet_person\nimport greet\n\ngreet_person('x')\ngreet.greet_person('y')\n"
    )
    assert "2 in greet.py" in done.summary()


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({"b.py": "say_hello = 3\n"}, "bound by an assignment elsewhere"),
        ({"b.py": "def f(say_hello):\n    return say_hello\n"}, "an argument of the same name"),
        ({"b.py": "def say_hello():\n    pass\n"}, "defined twice"),
        ({"b.py": "greet_person = 1\n"}, "the new name is taken"),
        ({"b.py": "__all__ = ['say_hello']\n"}, "a string names it"),
        ({"b.py": "import os as say_hello\n"}, "an import alias"),
        ({"b.py": "def broken(:\n    say_hello\n"}, "a file that does not parse uses it"),
        ({"b.py": "f(say_hello=1)\n"}, "a keyword argument of that name"),
    ],
)
def test_a_rename_whose_meaning_is_not_plain_is_left_to_the_model(tmp_path: Path, files, why) -> None:
    (tmp_path / "greet.py").write_text(GREET)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert exact_rename(Workspace(tmp_path), "Rename say_hello to greet_person.") is None, why


def test_a_name_no_def_or_class_defines_is_left_to_the_model(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("print(say_hello)\n")
    assert exact_rename(Workspace(tmp_path), "Rename say_hello to greet_person.") is None


def test_a_method_is_renamed_with_its_calls_on_self(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "class A:\n    def area(self):\n        return 1\n\n"
        "    def twice(self):\n        return 2 * self.area()\n"
    )
    done = exact_rename(Workspace(tmp_path), "Rename the method area to surface")
    assert (
        done is not None
        and "self.surface()" in done.edits[0].content
        and "def surface(self)" in done.edits[0].content
    )


def test_a_workspace_with_a_secret_looking_python_file_leaves_the_rename_to_the_model(tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text(GREET)
    (tmp_path / "prod.py").write_text("from greet import say_hello\nsay_hello('x')\n")
    ws = Workspace(tmp_path, secrets=SecretFiles(extra=("prod.py",)))
    assert exact_rename(ws, "Rename say_hello to greet_person.") is None
    assert exact_rename(Workspace(tmp_path), "Rename say_hello to greet_person.") is not None
