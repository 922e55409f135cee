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


async def test_a_program_that_works_passes_and_one_that_is_not_written_does_not():
    cases = {t.task_id: program_case(t) for t in PROGRAM_TASKS}
    fizz, wc = cases["program/fizzbuzz"], cases["program/wc"]
    replies = {"fizzbuzz": f"```python\n{FIZZBUZZ}```", "wc": "I would count the words."}
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel([replies[order.pop(0)]])})
    order = ["fizzbuzz", "wc"]
    results = await run_suite([fizz, wc], [VARIANTS["fast"]], pool, say=lambda line: None)
    summary = results["fast"]["summary"]
    assert summary["pass_rate"] == 0.5 and summary["no_edit_share"] == 0.5 and summary["runaways"] == 0
    passed = {r["task_id"]: r["passed"] for r in results["fast"]["runs"]}
    assert passed == {"program/fizzbuzz": True, "program/wc": False}
