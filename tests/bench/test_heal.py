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
