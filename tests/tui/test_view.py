"""The transcript the agent's events become: lines, diffs with the code's colours, command output."""

from __future__ import annotations

import io

from rich.console import Console

from whiz.agent.editing.edits import FileChange, unified_diff
from whiz.agent.stats import TurnOutcome, TurnStats
from whiz.tui.diffs import render_diff
from whiz.tui.scrollback import Scrollback
from whiz.tui.view import TranscriptView


def plain_view() -> tuple[TranscriptView, io.StringIO]:
    out = io.StringIO()
    return TranscriptView(Scrollback(out, color_system=None)), out


def message(view: TranscriptView, *deltas: str) -> None:
    view({"type": "turn.started", "turn_id": "t"})
    view({"type": "item.started", "item": {"id": "i0", "type": "agent_message", "text": ""}})
    for delta in deltas:
        view({"type": "item.updated", "item": {"id": "i0", "type": "agent_message"}, "delta": delta})


def test_finished_lines_are_printed_and_the_open_line_stays_live():
    view, out = plain_view()
    message(view, "first li", "ne\nsecond", " line")
    assert out.getvalue() == "first line\n"
    assert view.partial == "second line"
    assert view.status().startswith("writing ")
    view({"type": "item.completed", "item": {"id": "i0", "type": "agent_message", "text": "", "whiz": {}}})
    assert out.getvalue() == "first line\nsecond line\n"
    assert view.partial == ""


def test_a_stopped_turn_says_so_and_a_failed_one_says_why():
    view, out = plain_view()
    message(view, "half a rep")
    view.turn_ended(TurnOutcome("t", "cancelled", "cancelled by the user", TurnStats()))
    assert out.getvalue() == "half a rep\n■ stopped\n"
    assert view.status() == ""
    view.turn_ended(TurnOutcome("t", "failed", "the model failed: boom", TurnStats()))
    assert out.getvalue().endswith("✗ failed: the model failed: boom\n")


def test_a_long_command_output_shows_its_tail():
    view, out = plain_view()
    output = "".join(f"line {i}\n" for i in range(30))
    view(
        {
            "type": "item.completed",
            "item": {
                "id": "i1",
                "type": "command_execution",
                "command": "pytest -q",
                "aggregated_output": output,
                "exit_code": 1,
                "status": "failed",
            },
        }
    )
    text = out.getvalue()
    assert text.startswith("$ pytest -q  (exit 1)\n  … 18 more line(s)\n  line 18\n")
    assert "line 17\n" not in text and text.endswith("  line 29\n")


def test_diff_lines_keep_the_codes_colours_on_a_red_or_green_ground():
    diff = unified_diff(FileChange("app.py", "def f():\n    return 1\n", "def f():\n    return 42\n"))
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system="truecolor", width=80).print(render_diff(diff))
    title, hunk, context, removed, added = out.getvalue().splitlines()
    assert "48;2;18;54;31" in added and "48;2;63;21;24" in removed  # the green and red grounds
    assert "38;2;102;217;239mreturn" in added.replace(";48;2;18;54;31", "")  # `return` as a keyword
    plain = io.StringIO()
    Console(file=plain, width=80).print(render_diff(diff))
    assert plain.getvalue() == "app.py\n@@ -1,2 +1,2 @@\n  def f():\n-     return 1\n+     return 42\n"


def test_escape_sequences_from_a_command_or_the_model_never_reach_the_terminal():
    view, out = plain_view()
    message(view, "red \x1b[31mtext\x1b[0m\x1b[2J\x07 ok\n")
    view(
        {
            "type": "item.completed",
            "item": {
                "id": "i1",
                "type": "command_execution",
                "command": "ls --color",
                "aggregated_output": (
                    "\x1b[1;34mdir\x1b[0m\r\nprogress 10%\rprogress 100%\n\x1b]0;title\x07done\n"
                ),
                "exit_code": 0,
                "status": "completed",
            },
        }
    )
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert text == "red text ok\n$ ls --color  (exit 0)\n  dir\n  progress 10%\n  progress 100%\n  done\n"
