"""Forced changes: where the deep model's first look writes the function back and no mutant
passes, rewrites begun for it up to one statement and a `# Fix:` comment; the comment is not
applied, a server that cannot go on from a reply's start is not asked."""

from __future__ import annotations

import textwrap

import pytest

from tests.modes.test_modes import HangsAfter, auto_ladder, items
from whiz.client import HttpClient
from whiz.modes import healing
from whiz.modes.candidates import ChatCandidates, Draw, ScriptedCandidates, generate
from whiz.modes.forced import MARK, forcings, statement_lines, unmarked
from whiz.modes.localize import Function, Localization

WORDS = '''def words(text):
    """The words of text, without the punctuation around them."""
    out = []
    for w in text.split():
        out.append(w)
    return out
'''
FIXED_LINE = '        out.append(w.strip(",.!?"))\n'
CHECK = "from words import words\nassert words('Hi, you.') == ['Hi', 'you'], words('Hi, you.')\n"
TASK = "Fix the bug in the function words in words.py"


def place(source: str = WORDS, indent: str = "") -> Localization:
    body = textwrap.indent(source, indent)
    fn = Function("words.py", "words", "words", 1, body.count("\n"), indent, body)
    return Localization(fn, "It keeps the punctuation.")


def test_a_function_is_forced_at_each_statement_those_the_call_ran_first_never_its_docstring():
    assert statement_lines(WORDS) == [3, 4, 5, 6]
    made = forcings(place(), [{"role": "user", "content": "fix it"}], ran={4, 5})
    assert [f.line for f in made] == [4, 5, 3, 6]
    # Each reply starts as the function up to its line, then the mark at that line's indent.
    assert made[1].start == "```python\n" + "".join(WORDS.splitlines(keepends=True)[:4]) + "        " + MARK
    assert made[0].messages == ({"role": "user", "content": "fix it"},)
    assert len(forcings(place(), [], limit=2)) == 2
    # A method is begun as it is written back, dedented; a class or code that does not parse, not at all.
    method = forcings(place(indent="    "), [])
    assert method[0].start.startswith("```python\ndef words(text):\n")
    assert forcings(place("def broken(:\n    pass\n"), []) == []


def test_the_marks_comments_are_taken_out_of_a_reply_but_not_one_the_function_had():
    (forced,) = [f for f in forcings(place(), []) if f.line == 5]
    reply = forced.start + " strip the punctuation around each word\n" + FIXED_LINE + "    return out\n```"
    text = unmarked(reply, forced)
    assert MARK not in text and FIXED_LINE in text and text.startswith("```python\ndef words(text):")
    # A second one the model wrote goes too: it is the prompt's, not the code's.
    again = forced.start + " one\n" + FIXED_LINE + "    # Fix: and another\n    return out\n```"
    assert unmarked(again, forced) == text
    own = WORDS.replace("    return out", "    # Fix: later\n    return out")
    (kept,) = [f for f in forcings(place(own), []) if f.line == 5]
    reply = kept.start + " here\n" + FIXED_LINE + "    # Fix: later\n    return out\n```"
    assert unmarked(reply, kept).count(MARK) == 1


def tail(line: int, change: dict[int, str] | None = None) -> str:
    """What the model writes after a forced start at `line`: a comment, then the function's lines
    from there (with `change` in place of some), and the fence."""
    lines = WORDS.splitlines(keepends=True)
    rest = [(change or {}).get(k, lines[k - 1]) for k in range(line, len(lines) + 1)]
    return " look here\n" + "".join(rest) + "```"


@pytest.fixture
def words_project(project):
    (project / "words.py").write_text(WORDS)
    (project / "check.py").write_text(CHECK)
    return project


def test_where_the_first_look_writes_back_and_no_mutant_passes_a_forced_change_fixes_it(words_project):
    back = f"```python\n{WORDS}```"
    # The first look writes the function back; then one forced draw per statement (3, 4, 5, 6),
    # each the function unchanged but the one at the append, which strips the punctuation.
    forced = [[tail(k, {5: FIXED_LINE} if k == 5 else None)] for k in (3, 4, 5, 6)]
    forced[0] = [" nothing to do\n\n" + tail(3)[len(" look here\n") :]]  # a blank line: no change
    deep = ScriptedCandidates([[back], *forced], continues=True)
    code, events, _ = auto_ladder(words_project, ScriptedCandidates([]), deep, task=TASK, mutants=True)
    assert code == 0, events[-1]
    rounds = items(events, "heal")
    assert [r.get("method") for r in rounds] == ["n", "mutants", "forced"] and rounds[-1]["passed"] == 1
    draws = deep.draws[1:]
    assert all(d.start and d.start.endswith(MARK) and d.temperature == 0.0 for d in draws)
    # Each predicts the function's tail from its line, which it copies once its change is made.
    lines = WORDS.splitlines(keepends=True)
    assert [d.prediction for d in draws] == ["".join(lines[k - 1 :]) + "```" for k in (3, 4, 5, 6)]
    statuses = {c["index"]: c["status"] for c in items(events, "heal_candidate") if c["round"] == 3}
    assert statuses[0] == "no_edit" and "passed" in statuses.values()
    # Begun in the first look's conversation, which the server has cached.
    assert all(call == deep.calls[0] for call in deep.calls[1:])
    fixed = (words_project / "words.py").read_text()
    assert fixed == WORDS.replace("        out.append(w)\n", FIXED_LINE)  # and no "# Fix:" comment


def test_a_model_server_that_cannot_continue_a_reply_is_not_asked_for_forced_changes(words_project):
    back = f"```python\n{WORDS}```"
    deep = ScriptedCandidates([[back], ["BUG: It keeps the punctuation."], [back]] + [[back]] * 8)
    code, events, _ = auto_ladder(words_project, ScriptedCandidates([]), deep, task=TASK, mutants=True)
    assert code != 0
    assert "forced" not in [r.get("method") for r in items(events, "heal")]
    assert all(d.start is None for d in deep.draws)


async def test_a_reply_begun_for_a_whiz_server_is_continued_and_one_that_ignores_it_is_found_out(serve_fake):
    messages = [{"role": "user", "content": "hello there"}]
    server = serve_fake()
    async with HttpClient(server.root) as http:
        source = ChatCandidates(http)
        assert source.continues is None  # not known before it is tried
        got = await generate(source, messages, Draw(1, 0.0, 32, start="echo: hel"))
    assert got.texts == ["echo: hello there"]  # the start and what followed it
    assert source.continues is True


class IgnoresStart:
    """A server that answers afresh whatever `continue_final_message` says, as most do."""

    async def stream(self, path, body):
        assert body["continue_final_message"] is True and body["messages"][-1]["role"] == "assistant"
        yield {"choices": [{"index": 0, "delta": {"content": "a new reply"}, "finish_reason": "stop"}]}


async def test_a_server_that_does_not_say_it_continued_is_not_asked_to_again():
    source = ChatCandidates(IgnoresStart())
    await generate(source, [{"role": "user", "content": "hi"}], Draw(1, 0.0, 32, start="```python\n"))
    assert source.continues is False


def test_a_round_of_forced_changes_that_runs_long_is_cut_and_the_sampled_rewrites_follow(
    words_project, monkeypatch
):
    back = f"```python\n{WORDS}```"
    fixed = back.replace("        out.append(w)\n", FIXED_LINE)
    # The forced draws would decode for an hour: the round is given up at its own limit, well
    # inside the heal's budget, and the sampled rewrite after it still runs (and passes).
    deep = HangsAfter([[back], ["BUG: It keeps the punctuation."], [fixed]] * 3, hang_from=1, forced=4)
    monkeypatch.setattr(healing, "FORCED_S", 0.5)
    code, events, _ = auto_ladder(words_project, ScriptedCandidates([]), deep, task=TASK, mutants=True)
    assert code == 0, events[-1]
    rounds = items(events, "heal")
    assert [r.get("method") for r in rounds][:3] == ["n", "mutants", "forced"]
    assert "out_of_time" not in rounds[2]
    cut = [c for c in items(events, "heal_candidate") if c["round"] == 3]
    assert cut and all(
        c["error"] == "the round's 0.5 s ran out while this one was being written" for c in cut
    )
    assert (words_project / "words.py").read_text() == WORDS.replace("        out.append(w)\n", FIXED_LINE)
