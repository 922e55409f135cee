"""`whiz bench parallel` against the fake engine: both modes run, write the same candidates, and
the report ends with one JSON line."""

import json

from whiz.bench.parallel import ParallelPlan, main


def test_a_short_run_compares_the_modes_and_prints_one_json_line(serve_fake, capsys):
    # A low confidence makes sampled candidates differ from one another.
    served = serve_fake(engine_kw={"confidence": 4.0, "step_s": 0.001, "n_seq_max": 6})
    assert main(ParallelPlan(served.root, n=5, max_tokens=24, rounds=2)) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["bench"] == "parallel" and result["model"] == "fake" and result["n"] == 5
    assert result["trials"] == 4
    # The same seeds give the same candidates, decoded together or one after another.
    assert result["identical_candidates"] == 4
    assert result["parallel"]["tokens"] == result["sequential"]["tokens"] > 0
    assert result["speedup"] > 0
    assert "one request, n=5" in captured.out and "5 requests, one after another" in captured.out
    assert captured.err.count("identical candidates") == 4


def test_a_server_that_cannot_decode_n_candidates_fails_with_one_line(serve_fake, capsys):
    served = serve_fake(engine_kw={"n_seq_max": 2})
    assert main(ParallelPlan(served.root, n=5, max_tokens=8, rounds=1)) == 1
    assert "at most 2 candidates" in capsys.readouterr().err


def test_bad_arguments_exit_2(capsys):
    assert main(ParallelPlan("http://127.0.0.1:9", n=1)) == 2
    assert "--n >= 2" in capsys.readouterr().err
