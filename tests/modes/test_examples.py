"""Which of a model's assert lines are the task's own examples, and which module they are for."""

from __future__ import annotations

from whiz.modes.examples import Examples, new_module, task_examples

WEB = (
    "Write app.py with a web request handler: a function handle(path) that returns a tuple "
    "(status, body): (200, 'hello') for '/', (200, the sum as text) for '/add?a=2&b=3' and any "
    "other integers a and b, and (404, 'not found') for every other path."
)
# The 1.5B's reply, abridged: it writes the program first, then asserts, inventing most.
REPLY = """```python
def handle(path):
    return (200, 'hello')

def check_handle():
    assert handle('/') == (200, 'hello')
    assert handle('/add?a=2&b=3') == (200, '5')
    assert handle('/add?a=10&b=20') == (200, '30')
    assert handle('/nope') == (404, 'not found')
    assert handle('/add?a=2&b=3&c=4') == (404, 'not found')
    assert handle('5') == (404, 'not found')
    assert handle('/add?a=2&b=3') == (200, '5')
    assert parse('/add?a=2&b=3') == {'a': 2}
    assert handle(path) == (200, 'hello')
    assert handle('/') == expected
    assert handle('/') != (404, 'not found')
    assert app.handle('/')  ==  (200,  'hello')
    assert handle('/add?a=2&b=3'"""


def test_only_calls_of_a_named_function_on_inputs_written_in_the_task_are_kept():
    kept = task_examples(REPLY, WEB, "app")
    # An input of the form the task writes, with other numbers, is one of "any other integers";
    # invented inputs, repeats, unnamed functions, names, non-literals and other comparisons go.
    assert kept == [
        "assert handle('/') == (200, 'hello')",
        "assert handle('/add?a=2&b=3') == (200, '5')",
        "assert handle('/add?a=10&b=20') == (200, '30')",
        "assert app.handle('/') == (200, 'hello')",
    ]


def test_an_invented_board_is_not_an_example_though_every_square_is_written_in_the_task():
    task = (
        "Write tictactoe.py: a function winner(board) where board is a list of 9 strings, each 'X', "
        "'O' or ' ', returning 'X' or 'O' for the player with three in a row, or None."
    )
    reply = "assert winner(['X', ' ', ' ', 'O', 'X', ' ', ' ', ' ', 'O']) == 'X'\n"
    assert task_examples(reply, task, "tictactoe") == []
    shown = task + " For example winner(['X', 'X', 'X', ' ', ' ', ' ', ' ', ' ', ' ']) is 'X'."
    reply += 'assert winner(["X","X","X"," "," "," "," "," "," "]) == "X"\n'
    assert task_examples(reply, shown, "tictactoe") == [
        "assert winner(['X', 'X', 'X', ' ', ' ', ' ', ' ', ' ', ' ']) == 'X'"
    ]


def test_a_number_counts_only_where_the_task_writes_it_on_its_own():
    task = "Write roman.py with to_roman(n) for n from 1 to 3999, e.g. to_roman(1994) == 'MCMXCIV'."
    reply = "assert to_roman(1994) == 'MCMXCIV'\nassert to_roman(99) == 'XCIX'\nassert to_roman(9) == 'IX'\n"
    assert task_examples(reply, task, "roman") == ["assert to_roman(1994) == 'MCMXCIV'"]


def test_the_module_is_the_one_new_python_file_at_the_top_of_the_workspace():
    assert new_module(["app.py"]) == "app"
    assert new_module(["app.py", "README.md"]) == "app"
    assert new_module(["a.py", "b.py"]) is None
    assert new_module(["pkg/app.py"]) is None
    assert new_module(["my-app.py"]) is None
    assert new_module([]) is None


def test_examples_of_the_tasks_form_are_checked_but_not_shown_to_the_model():
    # Shown every example that failed, the 1.5B wrote an `elif path == ...` branch for each.
    kept = task_examples(REPLY, WEB, "app")
    assert task_examples(REPLY, WEB, "app", as_written=True) == [kept[0], kept[1], kept[3]]
    examples = Examples("app", kept, hidden=[kept[2]])
    output = (
        "held: handle('/') == (200, 'hello')\n"
        "FAILED: handle('/add?a=2&b=3') == (200, '5'): it gave (404, 'not found')\n"
        "FAILED: handle('/add?a=10&b=20') == (200, '30'): it gave (404, 'not found')\n"
        "held: app.handle('/') == (200, 'hello')\n"
        "[examples] 2 of 4 of the task's own examples held"
    )
    assert examples.shown(output).splitlines() == [
        "held: handle('/') == (200, 'hello')",
        "FAILED: handle('/add?a=2&b=3') == (200, '5'): it gave (404, 'not found')",
        "held: app.handle('/') == (200, 'hello')",
        "FAILED: 1 more of the same form as the task's, with other values (not shown)",
        "[examples] 2 of 4 of the task's own examples held",
    ]
