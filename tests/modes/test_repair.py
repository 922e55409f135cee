"""Localize, repair, validate with scripted models: rewrites put in place, repeats not tested again
and not counted, the function's text sent as the prediction, garbage falling back to plain."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.modes.test_candidates import RecordingHttp
from whiz.agent.project.test_files import TestFiles
from whiz.agent.project.workspace import Workspace
from whiz.commands.common import Output
from whiz.commands.heal import heal_task
from whiz.modes.candidates import ChatCandidates, ScriptedCandidates
from whiz.modes.heal_results import CandidateResult, best_failure, pick_best
from whiz.modes.healing import HealSettings
from whiz.modes.localize import Localization, definition_index, new_function
from whiz.modes.pool import ScriptedPool
from whiz.modes.repair import INSTRUCTIONS as REPAIR_INSTRUCTIONS
from whiz.modes.repair import (
    MAX_DRAWS_PER_N,
    QUESTION,
    TEMPERATURES,
    WRITTEN_BACK,
    Brief,
    RepairPlan,
    attempts_stream,
    change_key,
    function_change,
    said_bug,
)
from whiz.modes.session import HEAL_N_DEFAULT, SessionOptions

STATS = '''def mean(xs):
    """The average of the numbers in xs."""
    return sum(xs) / (len(xs) + 1)


class Counter:
    def __init__(self):
        self.n = 0

    def bump(self, by=1):
        self.n += by + 1
        return self.n
'''
CHECK = (
    "from stats import Counter, mean\n"
    "for xs, want in [([1, 2, 3], 2), ([4], 4)]:\n"
    "    assert mean(xs) == want, f'mean({xs}) returned {mean(xs)}, expected {want}'\n"
    "print('ok')\n"
)
TEST_CMD = f"{sys.executable} check.py"
TASK = "Fix the bug in stats.py so the tests pass."  # no function named: localized by the model
LOCATED = "FILE: stats.py\nFUNCTION: mean\nLINES: 1-3\nBUG: It divides by one too many.\n"
FIXED = (
    '```python\ndef mean(xs):\n    """The average of the numbers in xs."""\n    return sum(xs) / len(xs)\n```'
)
WRONG = FIXED.replace("len(xs)", "(len(xs) - 1)")
PLAIN = "stats.py\n<<<<<<< SEARCH\n    return sum(xs) / (len(xs) + 1)\n=======\n"
PLAIN += "    return sum(xs) / len(xs)\n>>>>>>> REPLACE\n"
# The same change as WRONG, but for a comment and spacing.
WRONG_AGAIN = (
    '```python\ndef mean(xs):\n    """The average of the numbers in xs."""\n'
    "    # divide by the count\n    return sum(xs)/(len(xs)-1)\n```"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return stats_project(tmp_path)


def stats_project(tmp_path: Path) -> Path:
    """A project with the mean bug (STATS) and the check that catches it."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "stats.py").write_text(STATS)
    (root / "check.py").write_text(CHECK)
    return root


def place(root: Path, name: str) -> Localization:
    index = definition_index(Workspace(root), TestFiles(TEST_CMD))
    (fn,) = [f for f in index if f.name == name and f.kind == "function"]
    return Localization(fn, "a hypothesis")


def heal(project: Path, batches, task=TASK, source: ScriptedCandidates | None = None, **settings):
    pool = ScriptedPool(sources={"fast": source or ScriptedCandidates(batches)})
    out = io.StringIO()
    options = SessionOptions(project, home=project.parent / "home")
    code = heal_task(
        task,
        TEST_CMD,
        options,
        HealSettings(**{"n": 3, "test_timeout_s": 20, "localize": True, "mutants": False, **settings}),
        Output(json_mode=True, out=out, err=io.StringIO()),
        pool=pool,
    )
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    return code, events, pool.sources["fast"]


def items(events, kind):
    return [e["item"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == kind]


def test_a_rewrite_replaces_its_function_and_a_method_keeps_its_indent(project):
    ws = Workspace(project)
    change = function_change(ws, place(project, "mean"), "Here:\n" + FIXED + "\nDone.")
    assert change.after == STATS.replace("(len(xs) + 1)", "len(xs)")
    # A method written at the top level, as small models do, goes back into its class.
    method = "```python\ndef bump(self, by=1):\n    self.n += by\n    return self.n\n```"
    change = function_change(ws, place(project, "bump"), method)
    assert change.after == STATS.replace("self.n += by + 1", "self.n += by")
    # No function of that name in the reply: not a rewrite.
    assert function_change(ws, place(project, "mean"), "```python\ndef other():\n    pass\n```") is None


def test_changes_equal_but_for_comments_and_spacing_have_one_key(project):
    ws = Workspace(project)
    at = place(project, "mean")
    one = function_change(ws, at, WRONG)
    two = function_change(ws, at, WRONG_AGAIN)
    assert one.after != two.after
    assert change_key([one]) == change_key([two])
    assert change_key([one]) != change_key([function_change(ws, at, FIXED)])


def test_the_plan_spreads_places_and_temperatures_and_ends(project):
    places = [place(project, "mean"), place(project, "bump")]
    plan = RepairPlan(places, n=4, seed=10)
    first = plan.attempts(4)
    assert [(a.place.function.name, a.temperature, a.seed) for a in first] == [
        ("mean", 0.0, 10), ("bump", 0.0, 11), ("mean", 0.5, 12), ("bump", 0.5, 13),
    ]  # fmt: skip
    later = plan.attempts(8)
    assert 0.0 not in [a.temperature for a in later]  # a greedy reply is drawn once per place
    assert len(plan.attempts(100)) == MAX_DRAWS_PER_N * 4 - 12
    assert plan.done() and plan.attempts(1) == []


def test_a_deep_started_heal_samples_every_temperature_of_its_one_place(project):
    # Auto mode's default heal, started with the deep model: one place, N-1 rewrites. Some fixes
    # come only from the hottest samples; the greedy reply, which repeats, is drawn once.
    plan = RepairPlan([place(project, "mean")], n=HEAL_N_DEFAULT - 1, seed=3)
    temperatures = [a.temperature for a in plan.attempts(HEAL_N_DEFAULT - 1)]
    assert temperatures.count(0.0) == 1
    assert max(temperatures) > 1.0
    assert set(temperatures) == set(TEMPERATURES)


async def test_a_rewrite_is_asked_with_the_function_as_its_prediction(project):
    http = RecordingHttp()
    at = place(project, "mean")
    attempts = RepairPlan([at], n=3, seed=5).attempts(3)
    stream = attempts_stream(ChatCandidates(http), attempts, Brief(TASK, TEST_CMD, "E  failed"))  # type: ignore[arg-type]
    async with stream as found:
        got = [c async for c in found]
    assert len(got) == 3
    for body in http.bodies:
        assert body["prediction"] == {"type": "content", "content": f"```python\n{at.function.source}```"}
        user = body["messages"][-1]["content"]
        assert "E  failed" in user
        # What failed comes after the code, and the request says the code is wrong: shown the
        # function last and asked to correct it, the 0.5B wrote it back unchanged.
        assert user.index("def mean") < user.index("E  failed")
        assert user.rstrip().endswith(
            "The function above is wrong. Write `mean` fixed, whole, in one ```python block."
        )
    assert sorted(b["temperature"] for b in http.bodies) == [0.0, 0.5, 0.8]
    # Every other candidate is asked without the hypothesis, in case it is wrong.
    told = {
        b["temperature"]: "Likely cause: a hypothesis" in b["messages"][-1]["content"] for b in http.bodies
    }
    assert told == {0.0: True, 0.5: False, 0.8: True}


def test_heal_localizes_then_the_first_rewrite_that_passes_is_applied(project):
    code, events, source = heal(project, [[LOCATED], [WRONG], [FIXED], [WRONG]], first_pass=False)
    assert code == 0
    assert (project / "stats.py").read_text() == STATS.replace("(len(xs) + 1)", "len(xs)")
    (found,) = items(events, "localize")
    assert found["places"][0]["function"] == "mean" and found["sure"]
    statuses = sorted((c["index"], c["status"]) for c in items(events, "heal_candidate"))
    assert statuses == [(0, "failed"), (1, "passed"), (2, "failed")]
    assert source.draws[0].temperature == 0.0 and source.draws[0].max_tokens <= 200  # the short step
    # The failing rewrite's feedback is the assertion, not the whole run.
    failed = next(c for c in items(events, "heal_candidate") if c["status"] == "failed")
    assert "returned" in failed["failure"] and "expected 2" in failed["failure"]


def test_a_repeated_change_is_not_tested_again_nor_counted_and_the_draws_end(project):
    # The model says the same wrong thing, in other words, whatever it is asked.
    batches = [[LOCATED]] + [[WRONG if i % 2 else WRONG_AGAIN] for i in range(30)]
    code, events, source = heal(project, batches, rounds=1)
    assert code == 1 and (project / "stats.py").read_text() == STATS
    candidates = items(events, "heal_candidate")
    ran = [c for c in candidates if c["status"] == "failed" and c["same_as"] is None]
    assert len(ran) == 1  # one test run for one distinct change
    assert len(candidates) == MAX_DRAWS_PER_N * 3  # bounded: 3 draws per candidate wanted
    assert {c["status"] for c in candidates} == {"failed", "duplicate"}
    assert len(source.draws) == 1 + MAX_DRAWS_PER_N * 3  # the localization, then one draw each


def test_a_repair_stage_cut_short_by_the_time_budget_says_so(project):
    # The repair is the heal's one rung: with no time left after its first draw, it draws no more,
    # and the heal says it stopped at its budget, not that every draw failed.
    batches = [[LOCATED]] + [[WRONG]] * 9
    code, events, source = heal(project, batches, rounds=1, budget_s=0)
    assert code == 1 and (project / "stats.py").read_text() == STATS
    assert len(source.draws) == 1 + 3  # the localization, then the first draw of n = 3 at once
    (stage,) = items(events, "heal")
    assert stage["out_of_time"] is True
    assert "stopped at the heal's time budget" in events[-1]["error"]["message"]


@dataclass
class HangsFrom(ScriptedCandidates):
    """Its calls from the `hangs_from`-th on never finish writing (a slow model's long draw)."""

    hangs_from: int = 2

    def stream(self, messages, draw):
        self.delay_s = 3600.0 if len(self.draws) >= self.hangs_from else 0.0
        return super().stream(messages, draw)


def test_a_draw_still_being_written_when_the_budget_ends_is_given_up(project):
    # The localization and the first draw (a reply with no rewrite: nothing to test) come at
    # once; the next draw would decode for an hour. The heal ends at its budget, not the draw's.
    source = HangsFrom([[LOCATED], ["I see no bug."], [FIXED]])
    code, events, _ = heal(project, [], source=source, n=1, rounds=1, budget_s=1.0)
    assert code == 1 and (project / "stats.py").read_text() == STATS
    assert len(source.draws) == 3 and source.cancelled == [0]
    (stage,) = items(events, "heal")
    assert stage["out_of_time"] is True
    (given_up,) = [c for c in items(events, "heal_candidate") if c["status"] == "cancelled"]
    assert "time budget ran out" in given_up["error"]
    assert "stopped at the heal's time budget" in events[-1]["error"]["message"]


def test_a_repair_stage_with_time_left_draws_until_its_n_is_tested(project):
    code, events, source = heal(project, [[LOCATED]] + [[WRONG]] * 9, rounds=1, budget_s=600)
    assert code == 1 and len(source.draws) > 1 + 3
    assert "out_of_time" not in items(events, "heal")[0]
    assert "time budget" not in events[-1]["error"]["message"]


def test_a_garbage_localization_falls_back_to_plain_candidates(project):
    code, events, source = heal(project, [["I think the code is fine."], [PLAIN, PLAIN, PLAIN]])
    assert code == 0
    assert items(events, "localize")[0]["places"] == []
    assert source.draws[1].n == 3 and source.draws[1].prediction is None  # a plain round of n


def test_when_no_rewrite_passes_a_plain_round_follows_with_what_the_tests_said(project):
    batches = [[LOCATED]] + [[WRONG]] * 9 + [[PLAIN, PLAIN, PLAIN]]
    code, events, source = heal(project, batches, rounds=2)
    assert code == 0
    assert [i["round"] for i in items(events, "heal")] == [1, 2]
    last = source.calls[-1][-1]["content"]
    assert "expected 2" in last  # the closest failure's assertion


def test_failures_rank_by_tests_passed_then_by_the_smallest_diff():
    def r(index, passed, diff):
        result = CandidateResult(1, index, "", 10, "failed", diff_lines=diff)
        result.tests_passed = passed
        return result

    assert best_failure([r(0, 1, 2), r(1, 3, 9), r(2, 3, 4)]).index == 2
    assert pick_best([r(0, 5, 1)]) is None  # a failure is never applied, however many tests pass


def test_a_rewrite_may_take_the_new_name_the_task_asks_for_and_bring_helpers_and_imports(project):
    ws = Workspace(project)
    at = place(project, "mean")
    renamed = "```python\ndef average(xs):\n    return sum(xs) / len(xs)\n```"
    # Under another name only where the task names it ("Rename mean to average").
    assert function_change(ws, at, renamed) is None
    change = function_change(ws, at, renamed, "Rename mean to average and fix it.")
    assert change.after.startswith("def average(xs):\n    return sum(xs) / len(xs)\n\n\nclass Counter:")
    change = function_change(ws, at, renamed, "Change the function name to average.")
    assert change.after.startswith("def average(xs):")
    # A task that adds a function by that name: it goes in after mean, which stays.
    change = function_change(ws, at, renamed, "Add a function called average that returns the mean.")
    assert change.after.startswith(STATS[: STATS.index("\n\nclass")] + "\n\ndef average(xs):\n")
    assert change.after.count("def mean(xs)") == 1
    # A helper the rewrite calls, and the import it needs, come along; code it repeats does not.
    reply = (
        "```python\nimport math\nfrom stats import Counter\n\n"
        "def mean(xs):\n    return total(xs) / len(xs)\n\n"
        "def total(xs):\n    return math.fsum(xs)\n\n"
        "class Counter:\n    pass\n```"
    )
    after = function_change(ws, at, reply).after
    assert after.startswith("import math\ndef mean(xs):\n    return total(xs)")  # Counter is its own
    assert "\n\ndef total(xs):\n    return math.fsum(xs)\n" in after
    assert after.count("class Counter") == 1 and after.endswith(STATS[STATS.index("\n\nclass Counter") :])
    # Nothing new to import: the file's own imports stay as they are.
    assert function_change(ws, at, FIXED).after.startswith("def mean(xs):")


def class_place(root: Path, name: str) -> Localization:
    (cls,) = [d for d in definition_index(Workspace(root), TestFiles(TEST_CMD)) if d.qualname == name]
    assert cls.kind == "class"
    return Localization(cls)


COUNTER = STATS[STATS.index("class Counter") :]
RESET = "    def reset(self):\n        self.n = 0\n"


def test_a_class_place_takes_the_class_whole_or_the_methods_written(project):
    ws = Workspace(project)
    at = class_place(project, "Counter")
    # The class written whole, with a new method: it replaces the class.
    whole = f"```python\n{COUNTER.replace('by + 1', 'by')}\n{RESET}```"
    assert function_change(ws, at, whole).after == STATS.replace("by + 1", "by") + "\n" + RESET
    # Only the new method: added at the class's end, indented as its body.
    alone = "```python\ndef reset(self):\n    self.n = 0\n```"
    assert function_change(ws, at, alone).after == STATS + "\n" + RESET
    # A method it has, written alone: it replaces that method, the rest stays.
    bump = "```python\ndef bump(self, by=1):\n    self.n += by\n    return self.n\n```"
    assert function_change(ws, at, bump).after == STATS.replace("by + 1", "by")
    # A plain function is not a method, and another class is not this one: no change.
    assert function_change(ws, at, "```python\ndef reset(n):\n    return 0\n```") is None
    assert function_change(ws, at, "```python\nclass Other:\n    pass\n```") is None
    # A new top-level helper beside the rewritten class comes along; mean, already there, does not.
    beside = f"```python\n{COUNTER}\n\ndef helper():\n    return 1\n\n\ndef mean(xs):\n    return 0\n```"
    after = function_change(ws, at, beside).after
    assert after.endswith("def helper():\n    return 1\n") and after.count("def mean") == 1


def test_a_method_may_come_inside_its_class_with_new_methods_beside_it(project):
    ws = Workspace(project)
    reply = f"```python\n{COUNTER.replace('by + 1', 'by')}\n{RESET}```"
    after = function_change(ws, place(project, "bump"), reply).after
    assert after == STATS.replace("by + 1", "by") + "\n" + RESET
    assert after.count("def __init__") == 1  # the methods it did not change stay as they are


def test_heal_adds_a_method_through_its_class(project):
    (project / "check.py").write_text(
        "from stats import Counter\nc = Counter()\nc.bump()\nc.reset()\nassert c.n == 0, c.n\nprint('ok')\n"
    )
    located = "FILE: stats.py\nFUNCTION: Counter.reset\nBUG: Counter has no reset method.\n"
    wrong = "```python\ndef reset(self):\n    self.n = 1\n```"
    right = "```python\ndef reset(self):\n    self.n = 0\n```"
    # The task names mean, so draws alternate between the class and mean (whose draw is no rewrite).
    code, events, source = heal(
        project, [[located], [wrong], [wrong], [right]] + [[wrong]] * 6, first_pass=False
    )
    assert code == 0
    assert (project / "stats.py").read_text() == STATS + "\n" + RESET
    (found,) = items(events, "localize")
    assert found["places"][0]["function"] == "Counter" and not found["sure"]
    # The class is the prediction, and the request says what to write.
    rewrite = source.draws[1]
    assert rewrite.prediction == f"```python\n{COUNTER}```"


def test_after_a_write_back_the_places_later_draws_are_told_it_is_no_fix(project):
    original = f"```python\n{STATS[: STATS.index('class')].rstrip()}\n```"
    batches = [[LOCATED], [original], [WRONG], [FIXED]] + [[WRONG]] * 6
    code, events, source = heal(project, batches, n=2, first_pass=False)
    assert code == 0
    statuses = sorted((c["index"], c["status"]) for c in items(events, "heal_candidate"))
    assert statuses == [(0, "no_edit"), (1, "failed"), (2, "passed")]
    # The first draw (two requests) wrote the function back, so the next one says it is no fix.
    told = [WRITTEN_BACK in messages[-1]["content"] for messages in source.calls[1:]]
    assert told == [False, False, True]


def test_a_place_written_back_with_no_hypothesis_is_explained_once_and_drawn_greedily_told_it(project):
    # Localized with no BUG line: the model is not told what is wrong, and writes the code back.
    unsure = LOCATED.replace("BUG: It divides by one too many.\n", "")
    original = f"```python\n{STATS[: STATS.index('class')].rstrip()}\n```"
    batches = [[unsure], [original], [original], ["BUG: It divides by one too many."], [FIXED], [WRONG]]
    code, events, source = heal(project, batches, n=2, first_pass=False)
    assert code == 0 and (project / "stats.py").read_text() == STATS.replace("(len(xs) + 1)", "len(xs)")
    first, explained = items(events, "localize")
    assert first["places"][0]["hypothesis"] == ""
    assert explained["places"][0]["function"] == "mean"
    assert explained["places"][0]["hypothesis"] == "It divides by one too many."
    # The question is the write-back's request up to its ask: the server's cache has the rest.
    question, drawn = source.calls[3][-1]["content"], source.calls[1][-1]["content"]
    assert (
        question.endswith(QUESTION) and question[: -len(QUESTION)] == drawn[: len(question) - len(QUESTION)]
    )
    # The draw after the explanation is the most likely reply, told the hypothesis.
    after = source.calls[4][-1]["content"]
    assert source.draws[4].temperature == 0.0 and "Likely cause: It divides by one too many." in after
    statuses = sorted((c["index"], c["status"]) for c in items(events, "heal_candidate"))
    assert statuses == [(0, "no_edit"), (1, "no_edit"), (2, "passed"), (3, "failed")]


def test_a_place_is_explained_once_however_often_it_is_written_back(project):
    unsure = LOCATED.replace("BUG: It divides by one too many.\n", "")
    original = f"```python\n{STATS[: STATS.index('class')].rstrip()}\n```"
    explaining = "BUG: It should divide by the count."
    replies = iter([[unsure], [original], [original], [explaining]])
    # Every draw after the explanation writes the code back too.
    batches = [lambda m: next(replies, [original]) for _ in range(40)]
    code, events, source = heal(project, batches, n=2, rounds=1)
    assert code == 1 and (project / "stats.py").read_text() == STATS
    assert len(items(events, "localize")) == 2  # the localization, and one explanation
    asked = [m for m in source.calls if QUESTION in m[-1]["content"]]
    assert len(asked) == 1


def test_a_task_asking_for_a_new_function_gets_that_function_asked_for_and_added(project):
    # Told that the function it is shown is wrong and asked for it fixed, a small model mostly
    # writes it back unchanged where the task asks for a new function beside it.
    (project / "check.py").write_text("from stats import median\nassert median([1, 3, 2]) == 2\n")
    task = "Write a new function median in stats.py, beside mean, for the middle number of xs."
    median = "```python\ndef median(xs):\n    return sorted(xs)[len(xs) // 2]\n```"
    code, events, source = heal(project, [[LOCATED], [median]], task=task)
    assert code == 0
    assert (
        (project / "stats.py")
        .read_text()
        .startswith(
            STATS[: STATS.index("\n\nclass")] + "\n\ndef median(xs):\n    return sorted(xs)[len(xs) // 2]\n"
        )
    )
    asked = source.calls[1][-1]["content"]
    assert "`median` does not exist yet, and the tests need it. Write `median`" in asked
    assert "is wrong" not in asked and "the function `mean`, which the task refers to" in asked


def test_a_new_function_is_one_the_tests_miss_and_the_task_names_but_not_a_rename():
    failure = "ImportError: cannot import name 'median' from 'stats'"
    assert new_function("Add a function median to stats.py.", failure, {"mean"}) == "median"
    assert new_function("Fix mean.", failure, {"mean"}) == ""  # the task does not ask for it
    assert new_function("Add median.", failure, {"mean", "median"}) == ""  # it is there already
    missing = "NameError: name 'average' is not defined"
    assert new_function("Rename mean to average.", missing, {"mean"}) == ""
    assert new_function("Change the function name to average.", missing, {"mean"}) == ""
    assert new_function("Change the `mean` method to `average`.", missing, {"mean"}) == ""
    assert new_function("Change the function to 'average' that adds.", missing, {"mean"}) == ""
    assert new_function("Change the function to return the average.", missing, {"mean"}) == "average"
    assert new_function("Add average(name, xs).", missing, {"mean"}) == "average"  # a parameter
    assert (
        new_function("Add an average method.", "'Stats' object has no attribute 'average'", set())
        == "average"
    )


def test_a_new_function_with_a_name_parameter_goes_in_beside_the_place_not_instead(project):
    # "name" as a parameter, or in "the file name", asks for no rename: mean stays.
    fn = place(project, "mean")
    reply = "```python\ndef greet(name):\n    return 'hi ' + name\n```"
    for task in ("Add a function greet(name) to stats.py.", "Add greet, which takes the file name."):
        change = function_change(Workspace(project), fn, reply, task)
        assert change is not None and change.after.startswith(
            STATS[: STATS.index("\n\nclass")] + "\n\ndef greet"
        )
    renamed = function_change(
        Workspace(project), fn, reply.replace("greet", "average"), "Rename mean to average."
    )
    assert renamed is not None and "def mean" not in renamed.after


def test_the_hypothesis_is_read_from_a_bug_line_or_a_one_line_answer_but_not_from_code():
    assert said_bug("BUG: It divides by one too many.") == "It divides by one too many."
    assert (
        said_bug("Sure.\n**BUG:** `len(xs) + 1` should be `len(xs)`") == "`len(xs) + 1` should be `len(xs)`"
    )
    assert (
        said_bug("It returns the first match, not the last.") == "It returns the first match, not the last."
    )
    assert said_bug(FIXED) == "" and said_bug("def mean(xs): return 0") == ""
    assert said_bug("") == ""


def test_a_heal_whose_task_names_the_function_rewrites_it_without_asking_where(project):
    code, events, source = heal(project, [[FIXED]], task="Fix the bug in the function mean in stats.py")
    assert code == 0
    assert (project / "stats.py").read_text() == STATS.replace("(len(xs) + 1)", "len(xs)")
    (found,) = items(events, "localize")
    assert found["places"][0]["origin"] == "task" and found["ms"] == 0.0
    # No call asks where the bug is; the rewrites are shown the function, told it is wrong, with
    # no cause guessed.
    assert all(m[0]["content"] == REPAIR_INSTRUCTIONS for m in source.calls)
    user = source.calls[0][-1]["content"]
    assert "Likely cause" not in user and user.rstrip().endswith(
        "Write `mean` fixed, whole, in one ```python block."
    )
