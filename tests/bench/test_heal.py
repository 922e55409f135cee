"""`whiz bench heal` against the fake engine: every variant runs, the report is a table then one JSON line."""

from __future__ import annotations

import json
from pathlib import Path

from whiz.bench.heal import main
from whiz.engine.fake import last_user_message
from whiz.modes.endpoints import DeepSettings

TASK = {
    "task_id": "EditEval/7",
    "instruction": "Make double return twice its argument.",
    "context": "",
    "input": "def double(x):\n    return x + 1\n",
    "output": "def double(x):\n    return 2 * x\n",
    "test": "def check():\n    assert double(3) == 6\n",
}
FIX = "edit_7.py\n<<<<<<< SEARCH\n    return x + 1\n=======\n    return 2 * x\n>>>>>>> REPLACE\n"


def fixer(conversation: str) -> str:
    return FIX if "double" in last_user_message(conversation) else "no idea"


def test_the_bench_compares_one_attempt_heal_and_deep_and_times_decoding(serve_fake, tmp_path: Path, capsys):
    server = serve_fake(script=fixer)
    data = tmp_path / "editeval.jsonl"
    data.write_text(json.dumps(TASK) + "\n")
    code = main(target=server.root, limit=1, n=2, deep=DeepSettings(base_url=server.root), data=data)
    assert code == 0
    out = capsys.readouterr().out
    report = json.loads(out.strip().splitlines()[-1])
    variants = report["variants"]
    assert set(variants) == {"fast@1", "heal@2", "deep@1"}
    assert all(v["summary"]["pass_rate"] == 1.0 for v in variants.values())
    assert variants["heal@2"]["summary"]["candidates"] == 2
    decode = report["decode"]
    assert decode["n"] == 2 and decode["parallel_s"] > 0 and decode["sequential_s"] > 0
    assert "heal@2" in out and "parallel" in out  # the table came first


def test_missing_data_is_a_clear_error(tmp_path: Path, capsys):
    assert main(data=tmp_path / "none.jsonl") == 2
    assert "no EditEval data" in capsys.readouterr().err


MEAN_FIX = (
    '```python\ndef mean(xs):\n    """The average of the numbers in xs."""\n    return sum(xs) / len(xs)\n```'
)


def localizer(conversation: str) -> str:
    asked = last_user_message(conversation)
    if "FILE, FUNCTION, LINES, BUG" in asked:
        return "FILE: stats.py\nFUNCTION: mean\nLINES: 1-3\nBUG: one too many in the divisor"
    return MEAN_FIX if "The function above is wrong" in asked else "no idea"


def test_the_seeded_suite_reports_a_rate_per_seed_with_its_mean_and_spread(serve_fake, capsys):
    server = serve_fake(script=localizer)
    code = main(target=server.root, n=2, variants="heal,heal-plain", seeds=3, suite="seeded")
    assert code == 0
    out = capsys.readouterr().out
    report = json.loads(out.strip().splitlines()[-1])
    assert report["suite"] == "seeded" and report["seeds"] == 3
    heal = report["variants"]["heal@2"]["summary"]
    assert heal["rate_per_seed"] == [1.0, 1.0, 1.0] and heal["rate_mean"] == 1.0 and heal["rate_spread"] == 0
    assert sorted({r["seed"] for r in report["variants"]["heal@2"]["runs"]}) == [0, 1, 2]
    # Without localizing, the same model's replies are never an edit of the file: no pass.
    assert report["variants"]["heal@2-plain"]["summary"]["rate_mean"] == 0.0
    assert "100% ± 0%" in out


def test_bad_seeds_or_suite_are_a_clear_error(capsys):
    assert main(seeds=0) == 2
    assert main(suite="nope") == 2
    err = capsys.readouterr().err
    assert "--seeds" in err and "--suite" in err
