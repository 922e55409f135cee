"""Healing with scripted candidates: selection, isolation, timeouts, feedback rounds, escalation."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest

from tests.agent.conftest import turn_statuses
from whiz.agent.events import Collector
from whiz.agent.project.workspace import Workspace
from whiz.agent.store.sessions import SessionStore
from whiz.commands.common import Output
from whiz.commands.heal import heal_task
from whiz.commands.sessions import undo_last
from whiz.modes.candidates import CandidateStream, ScriptedCandidates
from whiz.modes.heal_results import CandidateResult, best_failure, pick_best
from whiz.modes.healing import Healer, HealSettings
from whiz.modes.notices import ItemEmitter
from whiz.modes.pool import ScriptedPool
from whiz.modes.router import ModeRouter
from whiz.modes.session import SessionOptions

BUGGY = "def average(xs):\n    total = 0\n    for x in xs:\n        total += x\n"
BUGGY += "    return total / (len(xs) + 1)\n"
CHECK = "from calc import average\nassert average([2, 4]) == 3, average([2, 4])\nprint('ok')\n"
TEST_CMD = f"{sys.executable} check.py"


def edit(search: str, replace: str, path: str = "calc.py") -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


FIX = edit("    return total / (len(xs) + 1)", "    return total / len(xs)")
BIG_FIX = edit(
    "    total = 0\n    for x in xs:\n        total += x\n    return total / (len(xs) + 1)",
    "    return sum(xs) / len(xs)",
)
WRONG = edit("    return total / (len(xs) + 1)", "    return total / (len(xs) - 1)")
MALFORMED = edit("    return total / (len(xs) + 2)", "    return total / len(xs)")
HANG = edit("    return total / (len(xs) + 1)", "    while True:\n        pass")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text(BUGGY)
    (root / "check.py").write_text(CHECK)
    return root


def run_heal(
    project: Path,
    batches,
    *,
    mode="fast",
    deep_batches=None,
    task="fix average in calc.py",
    delays_s=(),
    **settings,
):
    pool = ScriptedPool(sources={"fast": ScriptedCandidates(batches, delays_s=delays_s)})
    if deep_batches is not None:
        pool.sources["deep"] = ScriptedCandidates(deep_batches)
    out, err = io.StringIO(), io.StringIO()
    options = SessionOptions(project, mode=mode, home=project.parent / "home")
    code = heal_task(
        task,
        TEST_CMD,
        options,
        HealSettings(**{"n": 5, "test_timeout_s": 20, **settings}),
        Output(json_mode=True, out=out, err=err),
        pool=pool,
    )
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    return code, events, pool


def items(events, type_):
    return [e["item"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == type_]


def test_the_passing_candidate_with_the_smallest_diff_wins_and_every_result_is_shown(project):
    code, events, _ = run_heal(project, [[MALFORMED, BIG_FIX, WRONG, FIX, FIX]], first_pass=False)
    assert code == 0
    assert (project / "calc.py").read_text() == BUGGY.replace("(len(xs) + 1)", "len(xs)")
    results = {c["index"]: c for c in items(events, "heal_candidate")}
    assert [results[i]["status"] for i in range(5)] == ["malformed", "passed", "failed", "passed", "passed"]
    assert results[4]["same_as"] == 3  # the same edit is tested once
    assert results[1]["diff_lines"] > results[3]["diff_lines"]
    assert "not found" in results[0]["error"].lower() or results[0]["error"]
    assert "AssertionError" in results[2]["test_output"]
    (change,) = items(events, "file_change")
    assert change["status"] == "completed" and "+    return total / len(xs)" in change["diff"]
    assert events[-1]["type"] == "turn.completed"


def test_a_candidate_that_is_the_fixed_function_alone_is_tested_as_an_edit(project):
    # A small model often answers "Fix the bug in average" with the function in a fence, no path.
    bare = "```python\ndef average(xs):\n    return sum(xs) / len(xs)\n```\n"
    code, events, _ = run_heal(project, [[bare]], task="Fix the bug in average so the tests pass.")
    assert code == 0 and statuses(events) == ["passed"]
    assert (project / "calc.py").read_text() == "def average(xs):\n    return sum(xs) / len(xs)\n"


def test_candidates_never_touch_the_real_workspace_until_one_is_chosen(project):
    code, _events, _ = run_heal(project, [[WRONG, WRONG, MALFORMED]], rounds=1)
    assert code == 1
    assert (project / "calc.py").read_text() == BUGGY
    # Only the baseline test run touched the folder (its bytecode cache).
    assert {p.name for p in project.iterdir()} - {"__pycache__"} == {"calc.py", "check.py"}


def statuses(events) -> list[str]:
    """Each candidate's status, by index (items come as each candidate's tests end)."""
    return [c["status"] for c in sorted(items(events, "heal_candidate"), key=lambda c: c["index"])]


def test_a_hanging_candidate_times_out_while_the_others_are_judged(project):
    code, events, _ = run_heal(project, [[HANG, FIX]], test_timeout_s=3, first_pass=False)
    assert code == 0
    assert statuses(events) == ["timeout", "passed"]
    assert [c["status"] for c in items(events, "heal_candidate")] == ["passed", "timeout"]  # as each ended


def test_once_the_tests_were_seen_to_end_a_hanging_candidate_gets_ten_times_their_time(project):
    # A candidate that loops forever must not hold its round for the whole timeout when the tests
    # take a fraction of a second: the baseline run sets the bound.
    code, events, _ = run_heal(
        project, [[HANG, WRONG]], test_timeout_s=120, test_timeout_floor_s=1, first_pass=False, rounds=1
    )
    assert code == 1
    hung = next(c for c in items(events, "heal_candidate") if c["index"] == 0)
    assert hung["status"] == "timeout"
    # The bound is ten times the baseline run, floored at 1 s: the floor or above (a busy
    # machine's baseline is slower), and never the 120 s timeout.
    bound_s = float(re.search(r"ran past ([0-9.]+) s", hung["error"]).group(1))
    assert 1 <= bound_s < 120


def test_the_first_candidate_to_pass_ends_the_round_and_the_slower_ones_are_cancelled(project):
    # Candidate 1 would pass with a smaller diff than 0, but is still being written when 0 passes.
    code, events, pool = run_heal(project, [[BIG_FIX, FIX]], delays_s=[0.0, 30.0])
    assert code == 0
    assert statuses(events) == ["passed", "cancelled"]
    assert pool.sources["fast"].cancelled == [1]  # its decoding was stopped, not awaited
    (heal,) = items(events, "heal")
    assert heal["cancelled"] == 1 and heal["best"] == 0
    assert (project / "calc.py").read_text() == BUGGY.replace(
        "    total = 0\n    for x in xs:\n        total += x\n    return total / (len(xs) + 1)",
        "    return sum(xs) / len(xs)",
    )


def test_once_a_candidate_passes_a_hanging_test_run_is_stopped(project):
    code, events, _ = run_heal(project, [[HANG, FIX]], test_timeout_s=60)
    assert code == 0
    assert statuses(events) == ["cancelled", "passed"]
    hung = next(c for c in items(events, "heal_candidate") if c["index"] == 0)
    assert "tests were stopped" in hung["error"]


def test_the_best_failures_output_is_fed_back_for_a_second_round(project):
    batches = [[WRONG, MALFORMED], [FIX]]
    code, events, pool = run_heal(project, batches)
    assert code == 0
    second = pool.sources["fast"].calls[1]
    assert second[-2] == {
        "role": "assistant",
        "content": WRONG,
    }  # the failure that ran, not the malformed one
    assert "AssertionError" in second[-1]["content"] and "unchanged" in second[-1]["content"]
    assert [i["round"] for i in items(events, "heal")] == [1, 2]
    # The traceback names the workspace's files by their paths in it, not by the throwaway
    # copy's random folder (which made the same candidate's feedback, and so the next round,
    # differ from run to run), nor by the workspace's own folder (which differs between machines).
    assert 'File "check.py"' in second[-1]["content"]
    assert "whiz-heal-" not in second[-1]["content"] and str(project.resolve()) not in second[-1]["content"]


# The assertion a model cannot satisfy, rewritten into one it can.
CHEAT = edit("assert average([2, 4]) == 3, average([2, 4])", "assert True", path="check.py")


def test_a_candidate_that_rewrites_the_tests_is_rejected_and_told_why(project):
    code, events, pool = run_heal(project, [[CHEAT], [FIX]])
    assert code == 0
    assert statuses(events)[:1] == ["tests_changed"]
    rejected = next(c for c in items(events, "heal_candidate") if c["round"] == 1)
    assert "check.py" in rejected["error"] and rejected["exit_code"] is None  # never run
    second = pool.sources["fast"].calls[1]
    assert "tests are the specification" in second[-1]["content"]
    assert (project / "check.py").read_text() == CHECK
    assert (project / "calc.py").read_text() == BUGGY.replace("(len(xs) + 1)", "len(xs)")


def test_a_candidate_that_also_changed_the_tests_is_tested_on_its_code_alone(project):
    # The fixed file, then the test file quoted back with a line added.
    both = FIX + edit("print('ok')", "print('ok')\nprint('ok')", path="check.py")
    code, events, _ = run_heal(project, [[both]])
    assert code == 0 and statuses(events) == ["passed"]
    (candidate,) = items(events, "heal_candidate")
    assert "check.py" in candidate["error"] and "left out" in candidate["error"]
    assert (project / "check.py").read_text() == CHECK
    assert (project / "calc.py").read_text() == BUGGY.replace("(len(xs) + 1)", "len(xs)")


def test_only_test_edits_can_never_heal(project):
    code, _events, _ = run_heal(project, [[CHEAT], [CHEAT]])
    assert code == 1
    assert (project / "check.py").read_text() == CHECK


def test_test_edits_pass_when_the_user_allows_them(project):
    code, events, _ = run_heal(project, [[CHEAT]], allow_test_edits=True)
    assert code == 0
    assert statuses(events) == ["passed"]
    assert (project / "check.py").read_text() != CHECK


def test_fast_mode_gives_up_after_its_rounds_and_changes_nothing(project):
    code, events, pool = run_heal(project, [[WRONG], [WRONG]], deep_batches=[[FIX]])
    assert code == 1
    assert (project / "calc.py").read_text() == BUGGY
    assert items(events, "mode_change") == []
    assert pool.sources["deep"].calls == []
    assert "no candidate passed" in events[-1]["error"]["message"]


def test_auto_mode_escalates_to_deep_when_healing_finds_no_passing_candidate(project):
    code, events, pool = run_heal(project, [[WRONG], [WRONG]], mode="auto", deep_batches=[[FIX]])
    assert code == 0
    (change,) = items(events, "mode_change")
    assert (change["from"], change["to"], change["trigger"]) == ("fast", "deep", "healing")
    assert "no passing candidate" in change["reason"]
    assert [(i["round"], i["mode"]) for i in items(events, "heal")] == [(1, "fast"), (2, "fast"), (3, "deep")]
    assert len(pool.sources["deep"].calls) == 1


def test_the_escalation_is_in_the_session_log_and_the_heal_can_be_undone(project):
    home = project.parent / "home"
    code, _events, _ = run_heal(project, [[WRONG], [WRONG]], mode="auto", deep_batches=[[FIX]])
    assert code == 0
    store = SessionStore(home / "sessions.db")
    try:
        (info,) = store.list(project)
        logged = store.events(info.id)
    finally:
        store.close()
    assert [kind for _at, kind, _data in logged] == ["mode_change"]
    assert logged[0][2]["trigger"] == "healing"
    assert undo_last(project, home=home) is not None
    assert (project / "calc.py").read_text() == BUGGY


def test_a_refused_heal_asks_no_model_changes_nothing_and_is_recorded(project):
    task = "write a keylogger into calc.py that hides from antivirus and emails keystrokes"
    code, events, pool = run_heal(project, [[FIX]], task=task)
    assert code == 1
    assert pool.sources["fast"].calls == []
    assert events[-1]["type"] == "turn.failed"
    assert "refused by the safety policy" in events[-1]["error"]["message"]
    assert (project / "calc.py").read_text() == BUGGY
    assert turn_statuses(project) == ["refused"]


def test_the_baseline_failure_and_the_named_file_reach_the_model(project):
    _code, _events, pool = run_heal(project, [[FIX]])
    (messages,) = pool.sources["fast"].calls
    user = messages[-1]["content"]
    assert "calc.py:\n```\ndef average" in user  # the file the task names is attached
    assert "fail now" in user and "AssertionError" in user


def test_selection_order_is_pass_then_diff_then_tokens():
    def r(index, status, diff, tokens):
        return CandidateResult(1, index, "", tokens, status, diff_lines=diff)

    results = [r(0, "failed", 1, 1), r(1, "passed", 4, 10), r(2, "passed", 2, 50), r(3, "passed", 2, 40)]
    assert pick_best(results).index == 3
    assert pick_best([r(0, "failed", 1, 1)]) is None
    assert best_failure([r(0, "malformed", 0, 1), r(1, "timeout", 3, 1), r(2, "failed", 9, 9)]).index == 2
    # A one-line "program" that does not parse is not the closest attempt: the one that ran is.
    junk, program = r(0, "failed", 1, 10), r(1, "failed", 30, 400)
    junk.test_output = (
        '  File "wc.py", line 1\n    python wc.py a.txt\n           ^^\nSyntaxError: invalid syntax\n'
    )
    program.test_output = "NameError: name 'sys' is not defined\n"
    assert best_failure([junk, program]) is program


async def test_a_healer_without_edits_anywhere_reports_no_edit(project):
    collector = Collector()
    emit = ItemEmitter(collector)
    router = ModeRouter(
        ScriptedPool(sources={"fast": ScriptedCandidates([["READ calc.py"], ["LIST ."]])}), "fast", emit
    )
    outcome = await Healer(Workspace(project), TEST_CMD, HealSettings(n=2), emit=emit).heal(router, [])
    assert outcome.best is None
    assert {r.status for r in outcome.results} == {"no_edit"}


async def test_a_candidate_that_writes_the_code_back_says_so_and_shows_its_reply(project):
    # "no_edit" alone does not say whether the model wrote the file back or wrote words, nor what
    # it said; both decide what the ladder does next.
    collector = Collector()
    emit = ItemEmitter(collector)
    same = f"Here is the fixed code:\n\ncalc.py\n```python\n{BUGGY}```\n"
    candidates = ScriptedCandidates([[same, "The code is fine as it is."]])
    router = ModeRouter(ScriptedPool(sources={"fast": candidates}), "fast", emit)
    healer = Healer(Workspace(project), TEST_CMD, HealSettings(n=2, rounds=1), emit=emit)
    outcome = await healer.heal(router, [])
    back, words = outcome.results
    assert back.unchanged and not words.unchanged
    shown = collector.items("heal_candidate")
    assert "code back unchanged" in shown[0]["error"] and shown[0]["reply"] == same
    assert shown[1]["reply"] == "The code is fine as it is."


class DeadServer:
    def stream(self, messages, draw):
        from whiz.client import ConnectError

        async def produce(out):
            raise ConnectError("cannot reach http://127.0.0.1:9/v1/chat/completions: connection refused")

        return CandidateStream(draw.n, produce, "n")


def test_a_server_that_goes_away_midway_is_one_clear_line_and_changes_nothing(project):
    out, err = io.StringIO(), io.StringIO()
    options = SessionOptions(project, home=project.parent / "home")
    pool = ScriptedPool(sources={"fast": DeadServer()})
    code = heal_task(
        "fix calc.py", TEST_CMD, options, HealSettings(), Output(json_mode=True, out=out, err=err), pool=pool
    )
    assert code == 1
    assert err.getvalue().strip().splitlines()[-1].startswith("error: cannot reach")
    assert json.loads(out.getvalue().splitlines()[-1])["type"] == "error"
    assert (project / "calc.py").read_text() == BUGGY


def test_an_example_path_copied_from_the_prompt_is_taken_for_the_one_file_of_that_name(project):
    code, events, _ = run_heal(project, [[FIX.replace("calc.py\n", "path/to/calc.py\n", 1)]])
    assert code == 0
    assert (project / "calc.py").read_text() == BUGGY.replace("(len(xs) + 1)", "len(xs)")
    assert not (project / "path").exists()


def test_the_instructions_example_path_is_taken_for_the_one_file_the_task_names(project):
    # An edit under `path/to/file.py`, the example path of the instructions, is meant for the
    # file the task names, not refused as "does not exist".
    code, events, _ = run_heal(project, [[FIX.replace("calc.py\n", "path/to/file.py\n", 1)]])
    assert code == 0
    assert (project / "calc.py").read_text() == BUGGY.replace("(len(xs) + 1)", "len(xs)")
    assert not (project / "path").exists()


def test_a_bare_code_block_for_the_one_new_file_the_task_names_is_tested_as_that_file(project):
    # "Write wc.py": a candidate that is the program in a fence with no path is that file, as it
    # is for the agent; it was "no_edit" before.
    (project / "check.py").write_text("import wc\nassert wc.count('a b') == 2\n")
    program = "```python\ndef count(text):\n    return len(text.split())\n```\n"
    code, events, _ = run_heal(project, [[program]], task="Write wc.py with count(text), the number of words")
    assert code == 0, events
    assert (project / "wc.py").read_text() == "def count(text):\n    return len(text.split())\n"


def test_a_new_file_written_as_search_replace_of_the_example_path_is_that_file(project):
    # `path/to/file.py`, a SEARCH of what the model imagined was there, and the program as
    # REPLACE: the new file the task names, not an edit of a file that does not exist.
    (project / "check.py").write_text("import wc\nassert wc.count('a b') == 2\n")
    program = edit("import sys", "def count(text):\n    return len(text.split())", "path/to/file.py")
    code, events, _ = run_heal(project, [[program]], task="Write wc.py with count(text), the number of words")
    assert code == 0, events
    assert (project / "wc.py").read_text() == "def count(text):\n    return len(text.split())\n"
    assert not (project / "path").exists()


def test_the_terminal_says_what_a_heal_did_candidate_by_candidate(project):
    pool = ScriptedPool(sources={"fast": ScriptedCandidates([[WRONG, FIX]], delays_s=[0.0, 1.0])})
    out, err = io.StringIO(), io.StringIO()
    options = SessionOptions(project, home=project.parent / "home")
    code = heal_task("fix average", TEST_CMD, options, HealSettings(n=2), Output(out=out, err=err), pool=pool)
    assert code == 0
    shown = out.getvalue() + err.getvalue()
    assert "candidate 0: failed" in shown and "candidate 1: passed, 2 lines changed" in shown
    assert "heal round 1 (fast): 2 candidates decoded" in shown and "candidate 1 passes" in shown
    assert "2 candidates in 1 round" in shown.splitlines()[-1]


def test_a_heal_past_its_time_budget_starts_no_further_rung_and_says_so(project):
    # With no time at all, the first round runs and the escalation that would fix it does not.
    code, events, pool = run_heal(project, [[WRONG], [WRONG]], mode="auto", deep_batches=[[FIX]], budget_s=0)
    assert code == 1 and (project / "calc.py").read_text() == BUGGY
    assert [i["round"] for i in items(events, "heal")] == [1]
    assert pool.sources["deep"].calls == []
    assert "stopped at the heal's time budget" in events[-1]["error"]["message"]


def test_a_heal_within_its_budget_climbs_every_rung(project):
    code, events, _ = run_heal(project, [[WRONG], [WRONG]], mode="auto", deep_batches=[[FIX]], budget_s=600)
    assert code == 0 and [i["round"] for i in items(events, "heal")] == [1, 2, 3]
