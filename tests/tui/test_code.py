"""`whiz code` driven for real in a pseudo-terminal, over a scripted model: what a user types and sees."""

from __future__ import annotations

from pathlib import Path

from tests.tui.conftest import ORIGINAL

SLOW = {"delay_s": 0.12, "chunk_chars": 6}
LONG = (
    "I will answer at length, a word at a time. alpha beta gamma delta epsilon zeta eta theta "
    "iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega THE-END"
)
EDIT = "app.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return 42\n>>>>>>> REPLACE\n"


def test_a_reply_streams_with_its_ttft_and_speed(scripted):
    term = scripted([{"text": LONG, **SLOW}])
    term.enter("tell me a story")
    term.wait_for("alpha")
    screen = term.text()
    assert "THE-END" not in screen  # it arrives piece by piece
    assert "Esc stops" in screen
    term.wait_for(r"● writing [\d.]+ s · ttft ~\d+ ms · ~[\d.]+ tok/s")  # live estimates in the status line
    term.wait_for("THE-END")
    done = term.wait_for(r"── done in [\d.]+ s · 1 model call · ttft \d+ ms · [\d.]+ tok/s")
    assert done


def test_esc_stops_the_reply_at_once_and_the_input_stays_usable(scripted):
    term = scripted([{"text": LONG, **SLOW}, {"text": "second answer"}])
    term.enter("tell me a story")
    term.wait_for("alpha")
    term.press("esc")
    term.wait_for("■ stopped", timeout_s=10)
    assert "THE-END" not in term.settle(1.5)
    term.enter("go on")
    term.wait_for("second answer")
    term.wait_for("── done in")


def test_ctrl_c_stops_the_agent_without_leaving(scripted):
    term = scripted([{"text": LONG, **SLOW}, {"text": "still here"}])
    term.enter("tell me a story")
    term.wait_for("beta")
    term.press("ctrl-c")
    term.wait_for("■ stopped", timeout_s=10)
    term.enter("are you there?")
    term.wait_for("still here")
    assert term.child.isalive()


def test_a_message_typed_while_it_works_steers_it(scripted):
    term = scripted([{"text": "Working on it.\nStill working, slowly, on it.\n", **SLOW}, {"echo": True}])
    term.enter("do the thing")
    term.wait_for("Working on it")
    term.type("\x1b[A\x1b[B")  # Up and Down (escape sequences) must not stop it
    term.enter("use tabs please")
    term.wait_for(r"› use tabs please  \(the agent reads it at its next step\)")
    term.wait_for("→ delivered to the agent: use tabs please")
    term.wait_for("heard: use tabs please")  # the model's next step read it
    term.wait_for("── done in [\\d.]+ s · 2 model calls")
    assert "■ stopped" not in term.text()


def test_an_edit_shows_its_diff_and_undo_puts_the_file_back(scripted, project: Path):
    term = scripted([{"text": "Changing it.\n" + EDIT}])
    term.enter("make answer return 42")
    term.wait_for("✎ edited app.py")
    term.wait_for(r"-\s+return 1\n\+\s+return 42")
    term.wait_for("── done in")
    assert (project / "app.py").read_text() == "def answer():\n    return 42\n"
    term.enter("/diff")
    term.wait_for(r"(?s)── done in.*@@ -1,2 \+1,2 @@.*\+\s+return 42")
    term.enter("/undo")
    term.wait_for("↶ restored app.py")
    assert (project / "app.py").read_text() == ORIGINAL
    term.enter("/undo")
    term.wait_for("nothing to undo in this session")


def test_a_command_asks_first_and_runs_only_when_allowed(scripted):
    term = scripted(
        [
            {"text": "RUN echo approved-$((40+2))\n"},
            {"text": "It printed 42."},
            {"text": "RUN echo declined-$((40+2))\n"},
            {"text": "Fine, I did not run it."},
        ]
    )
    term.enter("run the check")
    term.wait_for(r"Allow the agent to run `echo approved-\$\(\(40\+2\)\)`\?")
    term.wait_for("waiting for your answer")
    term.type("y")
    term.wait_for(r"\$ echo approved-\$\(\(40\+2\)\)  \(exit 0\)\n  approved-42")
    term.wait_for("It printed 42.")
    term.enter("run it again")
    term.wait_for(r"Allow the agent to run `echo declined")
    term.type("n")
    term.wait_for(r"✗ not run: \$ echo declined")
    term.wait_for("Fine, I did not run it.")
    assert "declined-42" not in term.text()


def test_esc_during_an_approval_question_stops_the_turn(scripted):
    term = scripted([{"text": "RUN echo never-$((1+1))\n"}])
    term.enter("run it")
    term.wait_for("Allow the agent to run")
    term.press("esc")
    term.wait_for("■ stopped", timeout_s=10)
    assert "never-2" not in term.settle(1.0)


def test_help_and_the_settings_commands(scripted):
    term = scripted([])
    term.enter("/help")
    for name in ("/undo", "/diff", "/model", "/mode", "/approval", "/clear", "/resume", "/help"):
        term.wait_for(f"(?m)^{name}")
    term.enter("/approval read-only")
    term.wait_for("approval: read-only")
    term.wait_for(r"· fast · read-only ·")  # the status line
    term.enter("/approval sometimes")
    term.wait_for("no approval mode 'sometimes'; choose read-only, auto-edit, full-auto")
    term.enter("/frobnicate")
    term.wait_for("unknown command /frobnicate; /help lists them")


def test_read_only_approval_refuses_edits(scripted, project: Path):
    term = scripted([{"text": EDIT}, {"text": "I could not edit."}], WHIZ_TEST_APPROVAL="read-only")
    term.enter("make answer return 42")
    term.wait_for("not applied")
    term.wait_for("I could not edit.")
    assert (project / "app.py").read_text() == ORIGINAL


def test_sessions_can_be_resumed_and_cleared(scripted):
    term = scripted([{"text": "First answer."}])
    term.enter("remember the number 7")
    term.wait_for("── done in")
    term.press("ctrl-d")
    assert term.wait_exit() == 0

    term = scripted([{"echo": True}], WHIZ_TEST_RESUME="last")
    term.wait_for(r"resumed sess_\w+: 1 turn\(s\)")
    term.wait_for("› remember the number 7")
    term.enter("/clear")
    term.wait_for(r"new conversation sess_\w+")
    term.enter("/resume")
    listed = term.wait_for(r"(sess_\w+)  [\d-]+ [\d:]+  1 turn\(s\)  remember the number 7")
    term.enter(f"/resume {listed.group(1)[:12]}")
    term.wait_for(r"resumed sess_\w+: 1 turn\(s\)")


def test_ctrl_c_twice_leaves(scripted):
    term = scripted([])
    term.type("half a task")
    term.press("ctrl-c")  # clears the line
    term.press("ctrl-c")
    term.wait_for("press Ctrl-C again")
    term.press("ctrl-c")
    assert term.wait_exit() == 0


def test_up_recalls_what_was_typed_in_an_earlier_run(scripted):
    term = scripted([])
    term.enter("/mode")
    term.wait_for("● fast")
    term.press("ctrl-d")
    assert term.wait_exit() == 0
    term = scripted([])
    term.type("\x1b[A")  # Up
    term.wait_for(r"› /mode\s*$")


def test_leaving_while_the_agent_works_stops_it_and_keeps_the_session(scripted):
    term = scripted([{"text": LONG, **SLOW}])
    term.enter("tell me a story")
    term.wait_for("alpha")
    term.press("ctrl-d")
    assert term.wait_exit() == 0
    assert "THE-END" not in term.text()
    term = scripted([], WHIZ_TEST_RESUME="last")
    term.wait_for(r"resumed sess_\w+: 1 turn\(s\)")
    term.wait_for(r"› tell me a story\n  \(stopped\)")


def test_mode_shows_and_switches_the_model_for_the_next_tasks(scripted):
    term = scripted({"fast": [{"text": "fast here"}], "deep": [{"text": "deep here"}]})
    term.enter("/mode")
    term.wait_for(r"● fast  the fast model answers")
    term.wait_for("the fast model answers now · /mode NAME switches")
    term.enter("/mode sideways")
    term.wait_for("the mode must be fast, deep or auto, not 'sideways'; staying in fast mode")
    term.enter("hello")
    term.wait_for("fast here")
    term.enter("/mode deep")
    term.wait_for("⇄ fast → deep: you chose /mode deep")
    term.wait_for(r"· deep · auto-edit ·")  # the status line
    term.enter("hello again")
    term.wait_for("deep here")
    term.wait_for(r"(?s)deep here.*── done in")


def test_a_resumed_session_comes_back_in_its_mode_and_says_so(scripted):
    models = {"fast": [{"text": "fast here"}], "deep": [{"text": "deep here"}]}
    term = scripted(models)
    term.enter("/mode deep")
    term.wait_for(r"· deep · auto-edit ·")
    term.press("ctrl-d")
    assert term.wait_exit() == 0

    term = scripted(models, WHIZ_TEST_RESUME="last")
    term.wait_for(r"resumed sess_\w+ in deep mode \(as it was; --mode overrides\)")
    term.wait_for(r"· deep · auto-edit ·")
    term.enter("hello")
    term.wait_for("deep here")


def test_auto_mode_escalation_is_shown_with_its_reason(scripted, project: Path):
    missing = "app.py\n<<<<<<< SEARCH\n    return 7\n=======\n    return 42\n>>>>>>> REPLACE\n"
    term = scripted({"mode": "auto", "fast": [{"text": missing}] * 2, "deep": [{"text": "Deep.\n" + EDIT}]})
    term.wait_for(r"· auto · auto-edit ·")
    # A mechanical task, which auto starts on the fast model (a change of behaviour starts deep).
    term.enter("Rename the constant in answer to 42")
    term.wait_for(r"▲ escalated fast → deep: the fast model's edit failed to apply 2 times")
    term.wait_for("✎ edited app.py")
    term.wait_for(r"auto, deep now · auto-edit")
    assert (project / "app.py").read_text() == "def answer():\n    return 42\n"
