"""A reply caught in a loop is seen, and what came before the loop is kept."""

from pathlib import Path

from whiz.agent.repetition import loop_start, looping, runs_on

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


def test_a_loop_within_one_line_is_seen_before_the_line_ends():
    # The 0.5B's reply to EditEval 15: `eighth_notes = ['o|', 'o|', ...` on one line, to its output
    # limit (122 s, twice), where no complete line ever repeated.
    start = "edit.py\n```\ndef f():\n    notes = ["
    text = start + "'o|', " * 60 + "'o"
    assert text[: loop_start(text)] == start + "'o|', "


def test_long_lines_of_code_and_data_are_no_loop():
    assert loop_start("weights = [" + "0.0, " * 40 + "]") is None  # a short run of zeros is data
    assert loop_start("# " + "=" * 300) is None  # a rule: one character over and over
    row = ", ".join(f"'{c}{c}{n}'" for n in range(3) for c in "abcdefghijklmnopqrstuvwxyz")
    assert loop_start(f"names = [{row}]") is None  # alike, but not the same


def test_a_sentence_written_over_and_over_on_one_line_is_a_loop():
    # The 0.5B's reply to EditEval 12's failing tests (fast, pytest's output): one sentence of
    # prose, 120 characters, written again on the same line to the output limit, three replies in
    # a row (140 s); its edit, before the prose, was complete.
    start = "edit_12.py:\n```\ndef f(n):\n    return n\n```\n\nThis change uses `zfill`. "
    sentence = "The `zfill` method pads the string with zeros on the left, until it reaches the width `n`. "
    text = start + sentence * 5 + "The `zf"
    kept = text[: looping(text, "zf")]  # the first copy, give or take the characters both ends share
    assert (start + sentence).startswith(kept) and len(kept) > len(start + sentence) - 5
    assert loop_start(text) == looping(text, "zf")
    # A sentence said twice, or a long line of code that repeats a piece three times, is no loop.
    assert loop_start(start + sentence * 2 + "And so on.") is None
    call = "check(make_case(width=10, fill='0'), expect='0000000001'); "
    assert loop_start("    " + call * 3 + "done()") is None


def test_a_reply_that_runs_on_with_small_changes_is_told_from_code():
    ran_on = "def to_roman(n):\n" + "".join(
        f"    elif n <= {k + 5}:\n        return 'X' + 'V' + 'I' * (n - {k})\n" for k in range(3, 300, 5)
    )
    assert runs_on(ran_on) and loop_start(ran_on) is None  # no loop: every copy differs
    source = Path(__file__).parents[2] / "src" / "whiz" / "agent" / "repetition.py"
    assert not runs_on(source.read_text())  # code, however long
    assert not runs_on("x = 1\n" * 50)  # short texts are not judged
