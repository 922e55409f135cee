"""`whiz bench soak` against the fake engine, for a few seconds: every well-behaved turn served,
every hostile input refused, nothing lost, the engine idle soon after, one JSON line."""

import json

from whiz.bench.soak import SoakPlan, main


def test_a_short_soak_serves_refuses_and_goes_idle(serve_fake, capsys):
    served = serve_fake(engine_kw={"step_s": 0.001})
    plan = SoakPlan(served.root, seconds=2.0, ws_sessions=2, http_clients=2, max_tokens=8, turn_timeout_s=20)
    code = main(plan)
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0, result
    assert result["bench"] == "soak" and result["lost_turns"] == 0 and result["errors"] == {}
    assert result["served"] > 0 and result["hostile_rejected"] > 0 and result["vanished"] > 0
    assert result["ttft_ms_p50"] is not None and result["rss_mb_after"] > 0
    assert result["engine_idle_after_ms"] < 2000  # clients that vanished left no work behind
    assert "hostile_rejected" in out


def test_only_loopback_targets(capsys):
    assert main(SoakPlan("http://example.com:8321", seconds=1)) == 2
    assert "this machine only" in capsys.readouterr().err
