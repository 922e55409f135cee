"""A reply caught in a loop is seen, and what came before the loop is kept."""

from whiz.agent.repetition import loop_start

EDIT = "calc.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n"


def test_a_line_written_over_and_over_is_cut_after_its_first_copy():
    text = EDIT + ">>>>>>> REPLACE\n" * 30 + ">>>>>>> REP"
    assert text[: loop_start(text)] == EDIT


def test_a_cycle_of_a_few_lines_is_a_loop_too():
    cycle = "    x += 1\n    print(x)\n"
    text = "def f(x):\n" + cycle * 9
    assert text[: loop_start(text)] == "def f(x):\n" + cycle


def test_code_that_repeats_a_line_a_few_times_is_no_loop():
    text = "def f():\n" + "    pass\n" * 7 + "    return 1\n"
    assert loop_start(text) is None
    assert loop_start("\n" * 40) is None  # blank lines are no loop
    assert loop_start("") is None


def test_a_long_block_written_three_times_over_is_a_loop():
    # The 0.5B's reply to EditEval 39: six `elif` branches, written again and again to its limit.
    block = "".join(f'        elif b == "{c}":\n            depth += 1\n' for c in "{}[]()")
    start = "edit.py\n```\ndef f(brackets):\n    for b in brackets:\n"
    text = start + block * 3 + '        elif b == "'
    assert text[: loop_start(text)] == start + block
    assert loop_start(start + block * 2) is None  # twice is not yet a loop


def test_code_with_similar_blocks_is_no_loop():
    # Blocks alike but for a name: functions for each case, as code often has.
    body = "    x = make()\n    x.run()\n    assert x.ok\n    assert x.done\n\n"
    text = "".join(f"def test_{n}():\n{body}" for n in "abcdefgh")
    assert loop_start(text) is None
