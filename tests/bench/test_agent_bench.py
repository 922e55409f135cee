"""`whiz bench agent` over a scripted model: a program task is judged by running the program."""

from __future__ import annotations

from whiz.agent.scripted_model import ScriptedModel
from whiz.bench.agent import VARIANTS, program_case, run_suite
from whiz.bench.program_tasks import PROGRAM_TASKS
from whiz.modes.pool import ScriptedPool

FIZZBUZZ = (
    "for n in range(1, 31):\n"
    "    print('FizzBuzz' if n % 15 == 0 else 'Fizz' if n % 3 == 0 else 'Buzz' if n % 5 == 0 else n)\n"
)


async def test_a_program_that_works_passes_and_one_that_is_not_written_does_not(tmp_path):
    cases = {t.task_id: program_case(t) for t in PROGRAM_TASKS}
    fizz, wc = cases["program/fizzbuzz"], cases["program/wc"]
    replies = {"fizzbuzz": f"```python\n{FIZZBUZZ}```", "wc": "I would count the words."}
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel([replies[order.pop(0)]])})
    order = ["fizzbuzz", "wc"]
    results = await run_suite([fizz, wc], [VARIANTS["fast"]], pool, say=lambda line: None, keep=tmp_path)
    summary = results["fast"]["summary"]
    assert summary["pass_rate"] == 0.5 and summary["no_edit_share"] == 0.5 and summary["runaways"] == 0
    passed = {r["task_id"]: r["passed"] for r in results["fast"]["runs"]}
    assert passed == {"program/fizzbuzz": True, "program/wc": False}
    assert summary["runs_by_suite"] == {"programs": "1/2"}  # its own check, beside the judge
    # --keep: each task's final workspace and session, to see why it failed.
    assert (tmp_path / "fast" / "program_fizzbuzz" / "ws" / "fizzbuzz.py").read_text() == FIZZBUZZ
    assert (tmp_path / "fast" / "program_wc" / "home").is_dir()


async def test_a_program_that_runs_but_prints_the_wrong_thing_passes_its_check_not_the_judge():
    wc = program_case(next(t for t in PROGRAM_TASKS if t.task_id == "program/wc"))
    wrong = "wc.py\n```python\nimport sys\nprint(open(sys.argv[1]).read().count(' '))\n```\n"
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel([wrong])})
    results = await run_suite([wc], [VARIANTS["fast"]], pool, say=lambda line: None)
    run = results["fast"]["runs"][0]
    assert run["runs"] is True and run["passed"] is False
