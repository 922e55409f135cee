"""`whiz bench soak` against the fake engine, for a few seconds: every well-behaved turn served,
every hostile input refused, nothing lost, the engine idle soon after, one JSON line. Behind a
gateway, one replica killed partway costs no turn."""

import asyncio
import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import pytest

from tests.gateway.conftest import gateway, upstreams  # noqa: F401 (fixtures)
from whiz.bench.attackers import Target, yield_cpu
from whiz.bench.soak import Outcome, Soak, SoakPlan, main, parse_cpus
from whiz.gateway.fake import echo_reply


def test_a_short_soak_serves_refuses_and_goes_idle(serve_fake, capsys):
    served = serve_fake(engine_kw={"step_s": 0.001})
    plan = SoakPlan(served.root, seconds=2.0, ws_sessions=2, http_clients=2, max_tokens=8, hang_s=20)
    code = main(plan)
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0, (result["lost_by_why"], result["errors"])
    assert result["bench"] == "soak" and result["lost_turns"] == 0 and result["errors"] == {}
    assert result["served"] > 0 and result["hostile_rejected"] > 0 and result["vanished"] > 0
    assert result["slow_turns"] == 0 and result["gateway"] is None
    assert 0 < result["ttft_ms_p50"] < 2000 and result["rss_mb_after"] > 0
    assert result["engine_idle_after_ms"] < 2000  # clients that vanished left no work behind
    assert "hostile_rejected" in out


def test_slow_turns_are_served_and_counted_apart_from_lost_ones(serve_fake):
    # A turn whose first token comes after the patience (at 20 ms a step, it does) but ends is slow;
    # one with no end in time is lost.
    served = serve_fake(lambda c: "x" * 40, engine_kw={"step_s": 0.02})
    soak = Soak(SoakPlan(served.root, patience_s=0.01, hang_s=3, max_tokens=5))

    async def slow_then_lost() -> None:
        async with soak.socket() as ws:
            event = {"type": "response.create", "input": "go", "whiz": {"speculation": False}}
            await soak.turn("ws", lambda: soak.ws_attempt(ws, {**event, "max_output_tokens": 5}))
            soak.plan.hang_s = 0.2  # 40 tokens at 20 ms each: no end in time
            await soak.turn("ws", lambda: soak.ws_attempt(ws, {**event, "max_output_tokens": 40}))

    asyncio.run(slow_then_lost())
    assert soak.tally.served["ws"] == 1 and soak.tally.slow == 1
    assert dict(soak.tally.lost) == {"hung": 1}


def test_upstream_lost_is_sent_again_once_and_only_then_lost():
    soak = Soak(SoakPlan())
    answers = iter([Outcome(failed="upstream_lost"), Outcome(ttft_ms=5.0)])

    async def attempt() -> Outcome:
        return next(answers)

    asyncio.run(soak.turn("http", attempt))
    assert soak.tally.retried == 1 and soak.tally.served["http"] == 1 and not soak.tally.lost
    asyncio.run(soak.turn("http", lambda: asyncio.sleep(0, Outcome(failed="upstream_lost"))))
    assert soak.tally.retried == 2 and dict(soak.tally.lost) == {"upstream_lost": 1}


class Draws:
    """A stand-in for the soak's random draws: a two-turn conversation, each turn 'Count to 5.'."""

    def randint(self, low: int, high: int) -> int:
        return 2 if (low, high) == (1, 3) else 5


async def test_a_websocket_follow_up_lost_with_its_replica_is_sent_again_whole(upstreams, gateway):  # noqa: F811
    # The follow-up's replica dies mid-stream. With `store: false` that failure evicted the turn
    # it continued, so the same `previous_response_id` again would be refused: the soak sends the
    # whole conversation instead, as a client does, and loses no turn.
    replies = 0

    def dies_on_the_follow_up(messages):  # noqa: ANN001, ANN202
        nonlocal replies
        replies += 1
        for served in (a, b):
            served.fake.mode = "die_mid" if replies == 1 else "ok"  # the request after this one
        return echo_reply(messages)

    a, b = upstreams(script=dies_on_the_follow_up), upstreams(script=dies_on_the_follow_up)
    gw = gateway([a.url, b.url])
    soak = Soak(SoakPlan(gw.root, hang_s=10, max_tokens=64))
    await soak.ws_turn(None, Draws())
    assert soak.tally.retried == 1 and not soak.tally.lost, soak.tally.errors
    assert soak.tally.served["ws"] == 2
    last = (a.fake.bodies + b.fake.bodies)[-1]["messages"]
    assert [m["content"] for m in last] == ["Count to 5.", "echo: Count to 5.", "Count to 5."]


def test_behind_a_gateway_a_killed_replica_costs_no_turn(capsys):
    plan = SoakPlan(
        seconds=5.0, ws_sessions=3, http_clients=3, max_tokens=8, hang_s=30,
        gateway=True, replica_model="fake", kill_after_s=2.0,
    )  # fmt: skip
    code = main(plan)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["gateway"]["killed"] is not None and result["gateway"]["killed_after_s"] == 2.0
    assert code == 0, (result["lost_by_why"], result["errors"], result["retried_after_upstream_lost"])
    assert result["lost_turns"] == 0 and result["errors"] == {} and result["served"] > 0
    assert result["engine_idle_after_ms"] is not None and result["engine_idle_after_ms"] < 2000
    assert result["rss_mb_before"] > 0 and result["rss_mb_after"] > 0
    cluster = result["gateway"]
    assert (
        "retries_total" in cluster["counted_by_the_gateway"] and cluster["sigterm_exit_s"] < 5
    )  # the target


def test_only_loopback_targets(capsys):
    assert main(SoakPlan("http://example.com:8321", seconds=1)) == 2
    assert "this machine only" in capsys.readouterr().err


# The tests run the attackers at normal priority (`attackers_idle=False`): beside the suite's other
# workers no CPU is idle, and at idle priority they would hardly run in a few seconds.


def test_attackers_beside_the_honest_clients_cost_them_nothing(serve_fake, capsys):
    # The honest clients share this process (and its GIL) with the server: on a loaded machine
    # one can wait over a second to write a head it has a connection for, so the deadline on
    # heads is kept above that; the slowloris heads are still let go, by the per-address bound.
    # The run is long enough for the attacker's process to start and its heads to grow old on a
    # loaded machine too.
    served = serve_fake(engine_kw={"step_s": 0.001}, header_timeout_s=3.0)
    plan = SoakPlan(
        served.root, seconds=8.0, ws_sessions=2, http_clients=2, max_tokens=8, hang_s=20,
        attacks=("slowloris", "ping_flood"), attackers_idle=False,
    )  # fmt: skip
    code = main(plan)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, (result["lost_by_why"], result["errors"])
    assert result["lost_turns"] == 0 and result["served"] > 0
    slowloris, flood = result["attackers"]["slowloris"], result["attackers"]["ping_flood"]
    assert slowloris["held_peak"] > 512  # past the cap, and the honest clients were served anyway
    assert slowloris["timed_out_408"] + slowloris["closed"] > 0  # the server let its heads go
    assert flood["closed_by_server"] > 0
    assert result["rss_mb_peak"] > 0 and result["honest_gap_ms_max"] > 0


def test_a_second_key_reads_nothing_of_the_first_ones_prompt_through_the_gateway(capsys):
    plan = SoakPlan(
        seconds=4.0, ws_sessions=1, http_clients=1, max_tokens=8, hang_s=30,
        gateway=True, replica_model="fake", kill_after_s=100.0, attacks=("cross_key",), attackers_idle=False,
        server_cpus=(0,),
    )  # fmt: skip
    code = main(plan)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, result
    replicas = {url: cpus for url, cpus in result["cpus"].items() if url != "bench"}
    assert len(replicas) == 2 and all(cpus == [0] for cpus in replicas.values()), result["cpus"]
    probe = result["attackers"]["cross_key"]
    assert probe["probes_with_secret_cached"] > 0, probe  # the cache held the secret for its own key...
    assert probe["cached_tokens_max"] == 0, probe  # ...for its own tenant only


def test_cpu_pins_that_cannot_hold_are_refused(capsys):
    assert main(SoakPlan(seconds=1, cpus=(4096,))) == 2
    assert "--cpus: no CPU 4096 here" in capsys.readouterr().err
    assert main(SoakPlan(seconds=1, server_cpus=(0,))) == 2  # it pins only the cluster it starts
    assert "--server-cpus pins the cluster --gateway starts" in capsys.readouterr().err


def test_cpu_lists_read_as_taskset_reads_them():
    assert parse_cpus("1") == (1,) and parse_cpus("0,2") == (0, 2) and parse_cpus("1-3,0") == (0, 1, 2, 3)
    for bad in ("", "a", "3-1", "-1", ","):
        with pytest.raises(ValueError):
            parse_cpus(bad)


def test_an_unknown_attacker_is_refused(capsys):
    assert main(SoakPlan(seconds=1, attacks=("nope",))) == 2
    assert "no attacker 'nope'" in capsys.readouterr().err


def test_grammar_and_prediction_attackers_get_their_caps_and_cost_the_honest_nothing(serve_fake, capsys):
    # Each attacker reports what came back: a type-list bomb within the caps is served and one
    # nested past the depth cap gets a 400; anyOf nesting at the width cap is served and past it
    # gets a 400; an 8 MB prediction is served, cut, and the reply says so.
    served = serve_fake(engine_kw={"step_s": 0.001})
    plan = SoakPlan(
        served.root, seconds=8.0, ws_sessions=2, http_clients=2, max_tokens=8, hang_s=30,
        attacks=("grammar_bomb", "ambiguous_grammar", "giant_prediction"), attackers_idle=False,
    )  # fmt: skip
    code = main(plan)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, (result["lost_by_why"], result["errors"])
    assert result["lost_turns"] == 0 and result["served"] > 0
    bomb, ambiguous, giant = (result["attackers"][n] for n in plan.attacks)
    for report in (bomb, ambiguous):
        assert report["status"].get("200", 0) > 0 and report["status"].get("400", 0) > 0, report
        assert set(report["error_codes"]) == {"tool_grammar_too_large"}, report
    assert giant["status"].get("200", 0) > 0 and set(giant["status"]) == {"200"}, giant
    assert giant["notes"]["prediction"]["example"].startswith("cut to its first"), giant
    # Whose the gaps are: the bench's own loop lag, and how long the server took to answer polls.
    assert result["bench_lag_ms_max"] >= 0 and result["server_probe_ms_max"] > 0


def test_attackers_run_at_idle_priority():
    # Beside the honest clients on the bench's CPUs, they take only the CPU those leave, as
    # attackers on other machines take none of theirs.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        assert pool.submit(_policy_after_yield).result(timeout=60) == os.SCHED_IDLE


def _policy_after_yield() -> int:
    yield_cpu()
    return os.sched_getscheduler(0)


def test_attackers_come_from_another_address_than_the_honest_clients():
    # The server bounds half-sent heads per address: attackers sharing the honest clients'
    # 127.0.0.1 would have the honest heads closed with theirs, which no deployment sees.
    assert Target("http://127.0.0.1:8321", 0.0).source == "127.0.0.2"
    assert Target("http://[::1]:8321", 0.0).source is None  # no second address to take: as is
