"""The small-model retry policy, rule by rule (`retries.py`); test_loop.py has them in whole turns."""

from __future__ import annotations

from pathlib import Path

from whiz.agent.config import AgentConfig
from whiz.agent.context.prompt import EXAMPLE_LOOKS
from whiz.agent.project.workspace import Workspace
from whiz.agent.retries import (
    HOLLOW_AFTER,
    RETRY_TEMPERATURE,
    FailingAsIs,
    Hollowing,
    Redraw,
    RepeatedMalformed,
    Retries,
    echo,
    owed_feedback,
)
from whiz.agent.tools import Outcome
from whiz.agent.turns import Progress

GREET = 'def say_hello(name):\n    return "Hello, " + name\n\n\ndef main():\n    print(say_hello("world"))\n'


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": text}


def stuck_conversation() -> list[dict]:
    """The task, a reply that wrote the code back, the push-back, and a second such reply."""
    return [user("Fix it"), assistant("same code"), user("Wrote it back."), assistant("same again")]


# -- Redraw


def test_a_redraw_leaves_out_the_replies_that_owed_an_edit_and_is_sampled():
    items, redraw = stuck_conversation(), Redraw()
    assert redraw.items(items) == items and redraw.items(items) is not items  # a copy
    assert redraw.temperature is None and redraw.before(items) is None
    redraw.mark(1)
    redraw.mark(3)  # a run of them starts at the first
    feedback = [*items[:3], user("Still the same.")]
    assert redraw.items(feedback) == [user("Fix it\n\nStill the same.")]
    assert redraw.temperature == RETRY_TEMPERATURE
    assert redraw.before(feedback) == [user("Fix it")]
    assert redraw.before(feedback, "The tests fail.") == [user("Fix it\n\nThe tests fail.")]
    assert feedback[0] == user("Fix it")  # the conversation itself keeps everything


def test_a_redraw_that_does_not_start_after_a_message_sends_the_whole_conversation():
    items = [user("Fix it"), assistant("READ a.py"), {"type": "function_call_output", "output": "x"}]
    redraw = Redraw(at=2)
    assert redraw.items(items) == items
    assert Redraw(at=0).items(items) == items


# -- Hollowing


def test_functions_written_back_twice_are_shown_without_their_bodies(tmp_path: Path):
    (tmp_path / "greet.py").write_text(GREET)
    ws, config = Workspace(tmp_path), AgentConfig(actions="text")
    rule = Hollowing()
    for n in range(1, HOLLOW_AFTER):
        rule.wrote_back(ws, ["greet.py"], ["Fix say_hello"], config)
        assert rule.hollow is None and rule.note() == "" and rule.written_back == n
    rule.wrote_back(ws, ["greet.py"], ["Fix say_hello"], config)
    assert rule.hollow is not None and rule.hollow.names == ["say_hello"]
    [shown] = rule.hide([user(GREET)])
    assert "def say_hello(name):\n    ...\n" in shown["content"] and "Hello, " not in shown["content"]
    assert rule.note() == " The body of `say_hello` is left out above: write that function anew."
    assert rule.restore(shown["content"]) == GREET  # a body copied as `...` is the function as it was
    rule.clear()
    assert rule.hollow is None and rule.written_back == 0 and rule.hide([user(GREET)]) == [user(GREET)]


def test_tool_calls_are_never_shown_hollow_functions(tmp_path: Path):
    (tmp_path / "greet.py").write_text(GREET)
    rule = Hollowing()
    for _ in range(HOLLOW_AFTER + 1):
        rule.wrote_back(Workspace(tmp_path), ["greet.py"], ["say_hello"], AgentConfig(actions="tools"))
    assert rule.hollow is None  # an edit_file call's old_text is copied from the file


def test_the_note_names_several_hollow_functions(tmp_path: Path):
    (tmp_path / "greet.py").write_text(GREET)
    rule = Hollowing(written_back=HOLLOW_AFTER)
    rule.wrote_back(Workspace(tmp_path), ["greet.py"], ["say_hello and main"], AgentConfig(actions="text"))
    assert rule.note() == " The bodies of `say_hello`, `main` are left out above: write those functions anew."


# -- RepeatedMalformed


def test_only_a_malformed_reply_repeated_word_for_word_is_redrawn_from_the_first():
    rule = RepeatedMalformed()
    assert rule.seen("greet.py\n<<<<<<< SEARCH\nx", 1) is None
    assert rule.seen("greet.py\n<<<<<<< SEARCH\nx\n", 3) == 1  # the same, but for whitespace
    assert rule.seen("something else", 5) is None
    rule.clear()
    assert rule.seen("something else", 7) is None


# -- FailingAsIs


def test_the_tests_run_on_code_written_back_only_before_any_edit_and_once():
    config, rule = AgentConfig(test_cmd="pytest -q"), FailingAsIs()
    assert rule.due(config, changed=False, tests_fail=False)
    assert not rule.due(AgentConfig(), changed=False, tests_fail=False)  # no test command
    assert not rule.due(config, changed=True, tests_fail=False)
    assert not rule.due(config, changed=False, tests_fail=True)  # their output is already told
    rule.ran(Outcome("E   assert 1 == 2", ok=False))
    assert not rule.due(config, changed=False, tests_fail=False)
    assert (
        rule.note()
        == "The tests fail on the code as it is now:\nE   assert 1 == 2\nChange the code so that they pass."
    )
    rule = FailingAsIs()
    rule.ran(Outcome("1 passed"))
    assert rule.failing == "" and rule.note() == ""


# -- echo and feedback


def test_a_reply_that_writes_back_the_instructions_or_my_message_is_an_echo():
    items = [user("To write a file, put its path alone on a line, then the whole file in a block.")]
    assert echo("\n".join(EXAMPLE_LOOKS[:2]), items, 1) == "the instructions"
    assert echo("To write a file, put its path alone on a line,", items, 1) == "my last message"
    assert echo("To write a file, put its path alone on a line,", items, 0) is None  # no message before
    assert echo("greet.py\n```python\nprint(1)\n```", items, 1) is None


def test_what_is_owed_says_the_failing_tests_or_the_task():
    failing = owed_feedback("Fix it", changed=False, tests_fail=True, failing_as_is="E   boom")
    assert failing == "It is the code the tests failed on:\nE   boom\nChange it so that they pass."
    edited = owed_feedback("Fix it", changed=True, tests_fail=True, failing_as_is="E   boom")
    assert edited == "It is the code the tests failed on: change it so that they pass."
    task = owed_feedback("  Fix it " + "x" * 400, changed=False, tests_fail=False, failing_as_is=None)
    assert task.startswith("The task asks for a change, and none is made yet: Fix it x") and len(task) < 360


# -- the policy as the loop calls it


async def test_the_policy_runs_the_tests_once_and_shows_them_in_every_redraw(tmp_path: Path):
    (tmp_path / "greet.py").write_text(GREET)
    config = AgentConfig(actions="text", test_cmd="python check.py")
    turn, runs = Progress("Fix say_hello"), []

    async def run_tests() -> Outcome:
        runs.append(1)
        turn.tests_fail = True
        return Outcome("E   AssertionError: say_hello('a')", ok=False)

    retries = Retries(Workspace(tmp_path), config)
    retries.begin_turn(turn)
    items = [user("Fix say_hello"), assistant(GREET)]
    for _ in range(HOLLOW_AFTER):
        retries.replied(1)
        await retries.written_back(items, ["greet.py"], 0, run_tests)
        told, error = retries.push_back("wrote the code back unchanged")
    assert runs == [1] and turn.tests_fail
    assert told.startswith("Your last reply wrote the code back unchanged. It is the code the tests failed")
    assert "AssertionError" in told and told.endswith("write that function anew.")
    assert error == "the reply wrote the code back unchanged, and the tests (`python check.py`) still fail"
    sent = retries.request([*items, user(told)])
    assert sent.temperature == RETRY_TEMPERATURE and sent.hollow is not None
    [retry_from] = sent.retry_from
    assert "AssertionError" in retry_from["content"] and "write that function anew" in retry_from["content"]
    retries.forget()  # compacted: the requests see the conversation as it is, the tests' output stays
    assert retries.request(items).retry_from is None and retries.as_is.failing
    retries.begin_turn(Progress("Another task"))
    assert retries.as_is.failing is None and retries.redraw.at is None


def test_an_echo_is_told_what_is_still_owed_or_the_task_again():
    retries = Retries(Workspace(Path(".")), AgentConfig())
    retries.begin_turn(Progress("Rename say_hello"))
    retries.replied(1)
    echoed = "\n".join(EXAMPLE_LOOKS[:2])
    told, error = retries.echoed([user("Rename say_hello")], echoed, lambda: False)
    assert (
        told
        == "Your last reply wrote the instructions back instead of acting on it. The task: Rename say_hello"
    )
    assert error == "the reply wrote the instructions back"
    told, _ = retries.echoed([user("Rename say_hello")], echoed, lambda: True)
    assert told.endswith("The task asks for a change, and none is made yet: Rename say_hello")
    assert retries.echoed([user("Rename say_hello")], "I renamed it.", lambda: True) is None


def test_a_repeated_malformed_reply_makes_the_next_request_a_redraw():
    retries = Retries(Workspace(Path(".")), AgentConfig())
    retries.begin_turn(Progress("Fix it"))
    items = [user("Fix it"), assistant("bad block"), user("Your block is malformed.")]
    retries.replied(1)
    retries.malformed("bad block")
    assert retries.request(items).temperature is None
    retries.replied(3)
    retries.malformed("bad block")
    assert retries.request([*items, assistant("bad block"), user("Malformed again.")]).items == [
        user("Fix it\n\nMalformed again.")
    ]
    retries.acted()
    assert retries.request(items).temperature is None
