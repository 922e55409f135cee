"""`whiz bench stall` against the fake engine: a row per worst case, each with the plain stream's
largest gap and how the hostile request ended, then one JSON line."""

import json

from whiz.bench.stall import StallPlan, main


def test_the_stall_bench_reports_each_case_and_ends_with_json(capsys):
    assert main(StallPlan(model="fake", plain_tokens=16, hostile_tokens=8)) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["bench"] == "stall"
    assert set(result["results"]) == {"alone", "long-schema", "forced-nesting", "wrong-prediction"}
    for case, row in result["results"].items():
        assert row["tokens"] == 16 and row["max_gap_s"] is not None
        assert (case == "alone") == ("hostile" not in row)
    assert result["results"]["long-schema"]["hostile"]["finish"] in ("length", "stop")
    assert "forced-nesting" in out and result["worst_gap_s"] >= 0
