"""Parsing edits out of a model's reply: SEARCH/REPLACE, Codex patches, whole files, malformed blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from whiz.agent.editing.actions import ParseError, parse_edits
from whiz.agent.editing.edits import (
    EditError,
    PatchEdit,
    PatchHunk,
    SearchReplace,
    WholeFile,
    apply_changes,
    plan_edits,
)
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace


def test_search_replace_blocks_with_fences_and_decorated_paths() -> None:
    reply = """I'll rename the function.

src/app.py
```python
<<<<<<< SEARCH
def greet(name):
    return "hi " + name
=======
def hello(name):
    return "hi " + name
>>>>>>> REPLACE
```

And its caller, in **`src/main.py`**:

```
<<<<<<< SEARCH
greet("bob")
=======
hello("bob")
>>>>>>> REPLACE
<<<<<<< SEARCH
import app
=======
import app  # same file again
>>>>>>> REPLACE
```
Done."""
    assert parse_edits(reply) == [
        SearchReplace(
            "src/app.py",
            'def greet(name):\n    return "hi " + name\n',
            'def hello(name):\n    return "hi " + name\n',
        ),
        SearchReplace("src/main.py", 'greet("bob")\n', 'hello("bob")\n'),
        SearchReplace("src/main.py", "import app\n", "import app  # same file again\n"),
    ]


def test_path_inside_the_fence_and_empty_search_for_a_new_file() -> None:
    reply = "```\n# tests/test_new.py\n<<<<<<< SEARCH\n=======\ndef test_x():\n    pass\n>>>>>>> REPLACE\n```"
    assert parse_edits(reply) == [SearchReplace("tests/test_new.py", "", "def test_x():\n    pass\n")]


def test_a_last_block_the_reply_ends_without_its_replace_marker() -> None:
    # The 1.5B wrote wc.py this way three times in a row, each refused: the reply was complete,
    # so the text after '=======' is the new text (inside its fence, words after the fence left out).
    fenced = "wc.py\n<<<<<<< SEARCH\n=======\n```python\nimport sys\nprint(1)\n```\nThis prints 1.\n"
    assert parse_edits(fenced) == [SearchReplace("wc.py", "", "import sys\nprint(1)\n")]
    bare = "a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n\n"
    assert parse_edits(bare) == [SearchReplace("a.py", "x = 1\n", "x = 2\n")]


def test_a_block_ended_by_the_close_of_a_fence_it_never_opened_leaves_the_fence_out() -> None:
    # The block closed with the fence the model imagined around it, not '>>>>>>> REPLACE': the
    # fence went into the file as its last line, a syntax error the next turn spent a call on.
    reply = "solution.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n```\n"
    assert parse_edits(reply) == [SearchReplace("solution.py", "x = 1\n", "x = 2\n")]
    # A new text that holds a whole fenced block keeps both its fences.
    doc = "README.md\n<<<<<<< SEARCH\nold\n=======\nRun:\n```\nmake\n```\n"
    assert parse_edits(doc) == [SearchReplace("README.md", "old\n", "Run:\n```\nmake\n```\n")]


def test_text_without_edits_gives_none() -> None:
    assert parse_edits("Just an answer.\n```python\nprint('hi')\n```\n") == []


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("a.py\n<<<<<<< SEARCH\nx = 1\n>>>>>>> REPLACE\n", "has no '=======' line between"),
        ("a.py\n<<<<<<< SEARCH\nx = 1\n", "has no '=======' line; the reply ended first"),
        ("a.py\n<<<<<<< SEARCH\nx = 1\n=======\n\n", "has no '>>>>>>> REPLACE' line; the reply ended"),
        ("a.py\n<<<<<<< SEARCH\nx\n=======\n```py\ny = 2\n", "has no '>>>>>>> REPLACE' line; the reply"),
        (
            "a.py\n<<<<<<< SEARCH\nx\n=======\ny\n<<<<<<< SEARCH\n",
            "no '>>>>>>> REPLACE' line before the next",
        ),
        ("<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n", "has no file path before it"),
        ("Here:\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n", "without a '<<<<<<< SEARCH' line"),
    ],
)
def test_malformed_search_replace_blocks(reply: str, expected: str) -> None:
    with pytest.raises(ParseError, match=expected) as caught:
        parse_edits(reply)
    assert (
        "the file path alone on a line, then\n<<<<<<< SEARCH\n" in caught.value.message
    )  # the format, shown


PATCH = """Here is the patch:
```
*** Begin Patch
*** Add File: docs/hello.txt
+Hello
+
+world
*** Update File: src/app.py
*** Move to: src/main.py
@@ class Greeter:
     def greet(self):
-        return "hi"
+        return "hello"

@@ def other():
-    pass
+    return 1
*** End of File
*** Delete File: old.py
*** End Patch
```"""


def test_codex_patch_is_parsed_into_file_operations() -> None:
    assert parse_edits(PATCH) == [
        PatchEdit("add", "docs/hello.txt", content="Hello\n\nworld\n"),
        PatchEdit(
            "update",
            "src/app.py",
            move_to="src/main.py",
            hunks=[
                PatchHunk(
                    ["    def greet(self):", '        return "hi"'],
                    ["    def greet(self):", '        return "hello"'],
                    context="class Greeter:",
                ),
                PatchHunk(["    pass"], ["    return 1"], context="def other():", end_of_file=True),
            ],
        ),
        PatchEdit("delete", "old.py"),
    ]


def test_patch_without_first_at_at_and_with_blank_context() -> None:
    patch = "*** Begin Patch\n*** Update File: a.py\n import os\n\n-x = 1\n+x = 2\n*** End Patch\n"
    assert parse_edits(patch) == [
        PatchEdit("update", "a.py", hunks=[PatchHunk(["import os", "", "x = 1"], ["import os", "", "x = 2"])])
    ]


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ("*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n", "has no '\\*\\*\\* End Patch' line"),
        ("*** Begin Patch\n*** End Patch\n", "is empty"),
        ("*** Begin Patch\n*** Update File: a.py\n*** End Patch\n", "changes nothing"),
        ("*** Begin Patch\n*** Update File: a.py\n@@\nx = 1\n*** End Patch\n", "does not start with ' '"),
        ("*** Begin Patch\n*** Frobnicate File: a.py\n*** End Patch\n", "is not a patch file operation"),
        ("*** Begin Patch\n*** Add File: a.py\nno plus\n*** End Patch\n", "every line starts with '\\+'"),
        ("*** Begin Patch\n*** Delete File:\n*** End Patch\n", "needs a file path"),
        (
            "*** Begin Patch\n*** Update File: a.py\n*** End of File\n*** End Patch\n",
            "must come after a hunk",
        ),
    ],
)
def test_malformed_patches(patch: str, expected: str) -> None:
    with pytest.raises(ParseError, match=expected):
        parse_edits(patch)


def test_whole_files_only_when_announced() -> None:
    reply = (
        "src/util.py\n```python\ndef f():\n    return 2\n```\n\n"
        "And `README.md`:\n````markdown\n# T\n```sh\nrun\n```\n````\n"
    )
    assert parse_edits(reply) == []
    assert parse_edits(reply, whole_files=True) == [
        WholeFile("src/util.py", "def f():\n    return 2\n"),
        WholeFile("README.md", "# T\n```sh\nrun\n```\n"),
    ]
    # A fence without a path before it is just code; one around SEARCH blocks is not a file.
    assert parse_edits("Look:\n```\nx = 1\n```\n", whole_files=True) == []
    blocks = "a.py\n```\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n"
    assert parse_edits(blocks, whole_files=True) == [SearchReplace("a.py", "x\n", "y\n")]
    with pytest.raises(ParseError, match="is not closed"):
        parse_edits("a.py\n```\nx = 1\n", whole_files=True)


def test_parse_errors_belong_to_the_agent_error_family() -> None:
    assert issubclass(ParseError, EditError) and issubclass(EditError, WhizAgentError)


def test_reply_to_disk_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(
        'class Greeter:\n    def greet(self):\n        return "hi"\n\n\ndef other():\n    pass\n'
    )
    (tmp_path / "old.py").write_text("gone\n")
    ws = Workspace(tmp_path)
    apply_changes(ws, plan_edits(ws, parse_edits(PATCH)))
    assert not (tmp_path / "src" / "app.py").exists() and not (tmp_path / "old.py").exists()
    assert (tmp_path / "src" / "main.py").read_text() == (
        'class Greeter:\n    def greet(self):\n        return "hello"\n\n\ndef other():\n    return 1\n'
    )
    assert (tmp_path / "docs" / "hello.txt").read_text() == "Hello\n\nworld\n"


@pytest.mark.parametrize(
    "lead_in", ["In greet.py:", "Here is the updated greet.py:", "**In greet.py:**", "In `greet.py`:"]
)
def test_a_whole_file_led_in_by_prose_naming_its_path_is_that_files_rewrite(lead_in: str) -> None:
    reply = f"{lead_in}\n```\ndef greet_person(name):\n    return name\n```\n"
    assert parse_edits(reply, whole_files=True) == [
        WholeFile("greet.py", "def greet_person(name):\n    return name\n")
    ]


@pytest.mark.parametrize("lead_in", ["Run this:", "In greet.py, replace it with:", "The code is fine."])
def test_prose_that_does_not_end_on_a_path_leaves_a_block_unnamed(lead_in: str) -> None:
    assert parse_edits(f"{lead_in}\n```\nx = 1\n```\n", whole_files=True) == []
