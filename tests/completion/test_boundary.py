"""Where a completion ends and what of it is shown (the stop and trim rules)."""

from __future__ import annotations

import pytest

from whiz.completion.boundary import Boundary, Cursor

FILE = '''import os


def add(a, b):
    """Add."""
    {cursor}


def mul(a, b):
    return a * b
'''

BODY_ABOVE_RETURN = "def add(a, b):\n    {cursor}\n    return total\n"


def at(text: str, **kw) -> Boundary:
    """A boundary at `|` in `text`."""
    before, after = text.split("|")
    return Boundary(Cursor.at(before, after), **kw)


def test_a_line_with_text_is_completed_to_its_end_only():
    b = at("x = compute(|\ny = 2\n")
    assert b.end("a, b)\n    more") == len("a, b)")
    assert b.shown("a, b)\nz = 3\n") == "a, b)"


def test_a_line_that_is_complete_already_gets_the_block_below_it():
    b = at("def add(a, b):|\n\n\ndef mul(a, b):\n    return a * b\n")
    out = "\n    total = a + b\n    return total\n\n\ndef sub(a, b):\n"
    assert b.shown(out) == "\n    total = a + b\n    return total"


def test_a_block_ends_where_the_code_dedents_below_the_cursor():
    b = at(FILE.replace("{cursor}", "|"))
    out = "total = a + b\n    return total\n\n\ndef sub(a, b):\n    return a - b\n"
    assert b.end(out) is not None
    assert b.shown(out) == "total = a + b\n    return total"


def test_a_block_goes_on_while_the_code_stays_indented():
    b = at(FILE.replace("{cursor}", "|"))
    assert b.end("if a:\n        return a\n    return b\n") is None


def test_n_indent_stops_lines_indented_less_than_it():
    b = at("    |\n", n_indent=8)
    assert b.shown("x = 1\n    y = 2\n") == "x = 1"


def test_an_opened_block_keeps_its_closing_bracket_and_stops_after_it():
    b = at("function f() {|\n}\n")
    out = "\n  return 1;\n}\nfunction g() {\n"
    assert b.shown(out) == "\n  return 1;\n}"


def test_at_the_top_level_a_block_is_one_paragraph():
    b = at("import os\n|\n")
    assert b.shown("import sys\nimport re\n\nprint(1)\n") == "import sys\nimport re"


def test_the_rest_of_the_line_is_not_written_twice():
    assert at("x = foo(|)\n").shown("a, b)") == "a, b"
    assert at("x = foo(|)\n").shown("a, b)\n") == "a, b"
    assert at("print(foo(|)\n").shown("x))") == "x)"  # one ) is the suffix's, the other is needed
    assert at("if x |:\n").shown("> 0:") == "> 0"
    assert at("return |value\n").shown("value") == ""


def test_a_closing_bracket_the_line_needs_is_kept():
    # `print(foo(x)` + `)`: the model's ")" closes foo, the suffix's closes print.
    assert at("print(foo(|)\n").shown("x)") == "x)"


def test_a_completion_that_repeats_the_next_line_is_dropped():
    b = at("def f():\n    |\n    return 1\n")
    assert b.shown("return 1\n") == ""
    b = at("def f():\n    x = 1\n    |\n    return x\n")
    assert b.shown("y = 2\n    return x\n") == "y = 2"


@pytest.mark.parametrize("out", ["\n\n", "   ", ""])
def test_only_whitespace_shows_nothing(out):
    assert at(FILE.replace("{cursor}", "|")).shown(out) == ""


@pytest.mark.parametrize(
    "out",
    [
        "total = a + b\n\n    return total\n\n\ndef sub(a, b):\n",
        "total = a + b\n    x = 1\n    y = 2\nz = 3\n",
        "total = a + b\n    x = 1\n    return total\n    y = 2\n",
    ],
)
@pytest.mark.parametrize("file", [FILE, BODY_ABOVE_RETURN])
def test_settled_text_is_always_the_start_of_what_is_shown(out, file):
    b = at(file.replace("{cursor}", "|"))
    for n in range(len(out) + 1):
        part = out[:n]
        end = b.end(part)
        if end is not None:
            break
        assert b.shown(out).startswith(part[: b.settled(part)])


def test_a_blocks_line_comes_with_its_newline_once_the_next_line_is_surely_in_the_block():
    b = at(FILE.replace("{cursor}", "|"))
    assert b.settled("total = a + b\n") == len("total = a + b")  # the block may end here
    assert b.settled("total = a + b\n    ") == len("total = a + b")
    assert b.settled("total = a + b\n    x") == len("total = a + b\n")
    # A line that may turn out to be the file's next line holds the newline back.
    b = at(BODY_ABOVE_RETURN.replace("{cursor}", "|"))
    assert b.settled("total = a + b\n    ret") == len("total = a + b")
    assert b.settled("total = a + b\n    x") == len("total = a + b\n")


def test_a_line_completion_is_held_back_until_it_ends():
    b = at("x = foo(|)\n")
    assert b.settled("a, b)") == 0
