"""Functions shown without their bodies to a stuck retry, and put back where a reply copies that."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.models.hollow import hollow
from whiz.agent.project.workspace import Workspace

LOADER = '''class DataLoader:
    def __init__(self, data, batch_size=4):
        self.data = data
        self.batch_size = batch_size

    def next_batch(self):
        """The next batch of data."""
        batch = self.data[:4]

        return batch


def total(a,
          b):
    return a + b
def same(x): return x
'''


def workspace(tmp_path: Path, **files: str) -> Workspace:
    for name, text in files.items():
        (tmp_path / name.replace("__", ".")).write_text(text)
    return Workspace(tmp_path)


def test_the_functions_the_tests_name_are_shown_with_header_and_docstring_only(tmp_path: Path):
    ws = workspace(tmp_path, loader__py=LOADER)
    found = hollow(ws, ["loader.py"], ["E   where 1 = total(1, 2)", "Fix next_batch"])
    assert found is not None and set(found.names) == {"total", "next_batch"}
    shown = found.hide(f"loader.py:\n```\n{LOADER}```\n")
    assert "return a + b" not in shown and "batch = self.data" not in shown
    assert "def total(a,\n          b):\n    ...\n" in shown  # a header over two lines stays whole
    assert '    def next_batch(self):\n        """The next batch of data."""\n        ...\n' in shown
    assert "self.batch_size = batch_size" in shown  # __init__ was not named: as it is


def test_with_no_function_named_every_function_of_the_file_is_hidden_but_one_liners(tmp_path: Path):
    ws = workspace(tmp_path, loader__py=LOADER)
    found = hollow(ws, ["loader.py"], ["Make it a generator."])
    assert found is not None and set(found.names) == {"__init__", "next_batch", "total"}
    shown = found.hide(LOADER)
    assert "def same(x): return x" in shown and "self.data = data" not in shown


def test_a_copied_header_with_its_placeholder_gets_the_body_back_at_its_own_indent(tmp_path: Path):
    ws = workspace(tmp_path, loader__py=LOADER)
    found = hollow(ws, ["loader.py"], ["Make it a generator."])
    assert found is not None
    # The whole file written back as shown: every body comes back, and nothing is changed.
    assert found.restore(found.hide(LOADER)) == LOADER
    # One method written anew, the other copied with its placeholder, a level deeper than it was.
    reply = (
        "```\n"
        "        def __init__(self, data, batch_size=4):\n"
        "            ...\n"
        "\n"
        "        def next_batch(self):\n"
        "            yield self.data\n"
        "```\n"
    )
    restored = found.restore(reply)
    assert "            self.data = data\n            self.batch_size = batch_size\n" in restored
    assert "yield self.data" in restored and "..." not in restored


def test_a_name_defined_twice_or_in_a_test_file_is_never_hidden(tmp_path: Path):
    twice = "def run():\n    return 1\n"
    ws = workspace(tmp_path, a__py=twice, b__py=twice + "def only():\n    return 2\n", test_b__py=LOADER)
    found = hollow(ws, ["a.py", "b.py", "test_b.py"], ["run it"], test_cmd="pytest test_b.py")
    # `run` could go back to either file; test_b.py holds the tests that decide.
    assert found is not None and found.names == ["only"]
    assert hollow(ws, ["test_b.py", "notes.txt"], ["total"], test_cmd="pytest test_b.py") is None


def test_messages_of_every_shape_are_hidden_and_the_originals_left_alone(tmp_path: Path):
    ws = workspace(tmp_path, loader__py=LOADER)
    found = hollow(ws, ["loader.py"], ["total"])
    assert found is not None
    asked = {"role": "user", "content": LOADER}
    said = {"role": "assistant", "content": [{"type": "output_text", "text": LOADER}]}
    hidden = found.items([asked, said])
    assert "return a + b" not in hidden[0]["content"]
    assert "return a + b" not in hidden[1]["content"][0]["text"]
    assert asked["content"] == LOADER and said["content"][0]["text"] == LOADER
