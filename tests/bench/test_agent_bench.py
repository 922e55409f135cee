"""`whiz bench agent` over a scripted model: a program task is judged by running the program."""

from __future__ import annotations

import json

import typer

from whiz.agent.models.scripted_model import ScriptedModel
from whiz.bench.agent import (
    SEED_BASE,
    VARIANTS,
    CaseRun,
    brief,
    main,
    over_seeds,
    print_report,
    program_case,
    run_suite,
)
from whiz.bench.program_tasks import PROGRAM_TASKS
from whiz.cli import app
from whiz.modes.candidates import ScriptedCandidates
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
    passed = {r["task_id"]: r["passed"] for r in results["fast"]["seeds"][0]["runs"]}
    assert passed == {"program/fizzbuzz": True, "program/wc": False}
    assert summary["runs_by_suite"] == {"programs": "1/2"}  # its own check, beside the judge
    # --keep: each task's final workspace and session, to see why it failed.
    assert (tmp_path / "seed0" / "fast" / "program_fizzbuzz" / "ws" / "fizzbuzz.py").read_text() == FIZZBUZZ
    assert (tmp_path / "seed0" / "fast" / "program_wc" / "home").is_dir()


async def test_a_program_that_runs_but_prints_the_wrong_thing_passes_its_check_not_the_judge():
    wc = program_case(next(t for t in PROGRAM_TASKS if t.task_id == "program/wc"))
    wrong = "wc.py\n```python\nimport sys\nprint(open(sys.argv[1]).read().count(' '))\n```\n"
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel([wrong])})
    results = await run_suite([wc], [VARIANTS["fast"]], pool, say=lambda line: None)
    run = results["fast"]["seeds"][0]["runs"][0]
    assert run["runs"] is True and run["passed"] is False


async def test_every_variant_runs_per_seed_and_reports_the_mean_and_range_of_passes():
    cases = {t.task_id: program_case(t) for t in PROGRAM_TASKS}
    fizz = cases["program/fizzbuzz"]
    # Seed 0 writes the program, seed 1 only talks: passes 1 and 0.
    replies = [f"```python\n{FIZZBUZZ}```", "I would print the numbers."]
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel([replies.pop(0)])})
    results = await run_suite([fizz], [VARIANTS["fast"]], pool, say=lambda line: None, seeds=2)
    summary = results["fast"]["summary"]
    assert (summary["tasks"], summary["seeds"]) == (1, 2)
    assert summary["passes"] == {"mean": 0.5, "min": 0, "max": 1, "stdev": 0.5, "per_seed": [1, 0]}
    rates = summary["passes_per_min"]
    assert rates["min"] == 0 and rates["max"] > 0 and rates["mean"] == rates["max"] / 2
    assert [s["seed"] for s in results["fast"]["seeds"]] == [0, 1]
    assert [s["summary"]["pass_rate"] for s in results["fast"]["seeds"]] == [1.0, 0.0]
    assert results["fast"]["seeds"][0]["runs"][0]["started_with"] == "fast"


async def test_seeds_draw_the_healing_candidates_apart(tmp_path):
    wc = program_case(next(t for t in PROGRAM_TASKS if t.task_id == "program/fizzbuzz"))
    good = f"fizzbuzz.py\n```python\n{FIZZBUZZ}```\n"
    candidates = ScriptedCandidates([[good] * 5, [good] * 5])
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel(["unused"])}, sources={"fast": candidates})
    await run_suite([wc], [VARIANTS["heal"]], pool, say=lambda line: None, seeds=2)
    first, second = (draw.seed for draw in candidates.draws)
    assert first is not None and second is not None and first != second


async def test_a_run_from_a_later_first_seed_draws_what_those_seeds_of_a_longer_run_draw():
    # Three more seeds after a run of three: --first-seed 1234 + 3 * 7919, --seeds 3.
    fizz = program_case(next(t for t in PROGRAM_TASKS if t.task_id == "program/fizzbuzz"))
    good = f"fizzbuzz.py\n```python\n{FIZZBUZZ}```\n"

    async def seeds_drawn(seeds: int, first_seed: int) -> list[int | None]:
        candidates = ScriptedCandidates([[good] * 5] * seeds)
        pool = ScriptedPool(clients={"fast": lambda: ScriptedModel(["unused"])}, sources={"fast": candidates})
        await run_suite(
            [fizz], [VARIANTS["heal"]], pool, say=lambda line: None, seeds=seeds, first_seed=first_seed
        )
        return [draw.seed for draw in candidates.draws]

    longer = await seeds_drawn(6, 1234)
    assert await seeds_drawn(3, 1234 + 3 * 7919) == longer[3:]
    assert len(set(longer)) == 6


def test_the_first_seed_flag_defaults_to_the_seed_a_run_starts_from():
    command = typer.main.get_command(app).commands["bench"].commands["agent"]  # type: ignore[attr-defined]
    assert {p.name: p.default for p in command.params}["first_seed"] == SEED_BASE


def test_the_report_is_a_table_then_one_json_line_with_every_seed(capsys):
    runs = [
        CaseRun("t/1", "editeval", "deep", passed, "completed", 30.0, False, False, 10, "", seed=seed)
        for seed, passed in ((0, True), (1, False))
    ]
    results = {"deep": over_seeds([runs[:1], runs[1:]])}
    report = {"bench": "agent", "target": "x", "seeds": 2, "results": results}
    print_report(report)
    out = capsys.readouterr().out.strip().splitlines()
    table = "\n".join(out[:-1])
    assert "seeds" in table and "0.5 (0-1)" in table  # passes: mean (min-max)
    last = json.loads(out[-1])
    assert last["results"]["deep"]["summary"]["passes_per_min"] == {"mean": 1.0, "min": 0.0, "max": 2.0}
    assert last["results"]["deep"]["summary"]["passes"]["per_seed"] == [1, 0]
    assert [s["runs"][0]["passed"] for s in last["results"]["deep"]["seeds"]] == [True, False]


def test_bad_options_and_missing_data_are_one_clear_line(tmp_path, capsys):
    assert main(seeds=0, suites="programs") == 2
    assert "--seeds takes 1 or more" in capsys.readouterr().err
    assert main(suites="humaneval") == 2
    assert "--suites takes editeval, canitedit, programs" in capsys.readouterr().err
    assert main(suites="canitedit", canitedit=tmp_path / "none.jsonl") == 2
    err = capsys.readouterr().err
    assert "no CanItEdit data" in err and "python scripts/canitedit.py" in err


async def test_auto_has_its_deep_model_at_hand_on_the_benchs_own_server_as_whiz_exec_does():
    """The bench measures the auto mode a user gets: with whiz's own fast server (started by the
    bench, or found at the default address) the deep model is at hand, so auto starts a change of
    behaviour with it; only a fast server the user named (--target) leaves it to --deep-base-url."""
    from whiz.bench.agent import bench_pool
    from whiz.modes.endpoints import DeepSettings, FastSettings, Reached
    from whiz.modes.pool import Label

    own = Reached("http://127.0.0.1:8321", None, "in this process")
    pool = bench_pool(FastSettings(in_process=True), DeepSettings(), own, say=lambda line: None)
    assert pool.offers(Label.DEEP)
    assert (await pool.endpoint(Label.FAST)).base_url == own.url  # the server reached, no other
    theirs = Reached("http://10.0.0.5:8000", "their-model", "http://10.0.0.5:8000")
    named = FastSettings(base_url=theirs.url, in_process=True)
    assert not bench_pool(named, DeepSettings(), theirs, say=lambda line: None).offers(Label.DEEP)


def test_a_kept_timeline_shows_what_each_candidate_wrote_cut_short():
    diff = "+def winner(board):\n" + "+    pass\n" * 500
    candidate = {"type": "heal_candidate", "status": "passed", "diff": diff, "changes": [{"path": "x"}]}
    kept = brief({"type": "item.completed", "item": candidate})
    assert kept["diff"].startswith("+def winner(board):") and len(kept["diff"]) == 2000
    assert "changes" not in kept and kept["status"] == "passed"
