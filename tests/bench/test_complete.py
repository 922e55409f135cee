"""`whiz bench complete`: the replay of typing, against the fake FIM model over HTTP."""

from __future__ import annotations

from tests.conftest import ServerThread
from whiz.bench.complete import MEASURES, Case, cases, pauses, replay, replay_paired, summary
from whiz.commands.serve import build_app
from whiz.completion.fake import fim_fake_engine, knows
from whiz.config import ServeSettings
from whiz.gateway.local import free_port


def test_the_functions_come_from_the_standard_library_in_files_of_the_asked_size():
    found = cases(quick=False, file_chars=8000)
    assert len(found) >= 6
    for case in found:
        assert case.body.strip() and f"def {case.name.rsplit('.', 1)[-1]}(" in case.before
        assert len(case.before) + len(case.body) + len(case.after) <= 8000 + 200


def test_typing_pauses_after_each_word_with_the_rest_of_the_line_to_come():
    case = Case("f", "def f(x):\n    ", "y = x + 1\n    return y", "\n\n\ndef g():\n    pass\n")
    seen = list(pauses(case, 100))
    assert seen[0] == (case.before, "\n" + case.after, "y = x + 1")
    assert seen[2] == (case.before + "y ", "\n" + case.after, "= x + 1")
    assert seen[-1][0] == case.before + case.body and seen[-1][2] == ""
    assert len(list(pauses(case, 3))) == 3


def test_the_replay_reports_every_measure_and_a_model_that_knows_the_file_is_always_right():
    case = Case("f", "def f(x):\n    ", "y = x + 1\n    return y", "\n\n\ndef g():\n    pass\n")
    engine = fim_fake_engine(knows(case.before + case.body + "\n" + case.after))
    server = ServerThread(build_app(engine, ServeSettings(model="fake", engine_only=True)), free_port())
    server.start()
    try:
        samples = replay(f"http://127.0.0.1:{server.server.config.port}", [case], 100, lambda _: None)
    finally:
        server.stop()
        engine.close()
    result = summary(samples)
    assert set(MEASURES) <= set(result) and result["requests"] == len(list(pauses(case, 100)))
    assert result["acceptance"] == 1.0
    assert result["prefill_tokens_median"] <= 3  # each pause only adds what was typed


def test_servers_compared_are_asked_in_turn_at_each_pause():
    case = Case("f", "def f(x):\n    ", "y = x + 1\n    return y", "\n\n\ndef g():\n    pass\n")
    doc = case.before + case.body + "\n" + case.after
    engines = [fim_fake_engine(knows(doc)), fim_fake_engine(lambda prefix, suffix: "")]
    settings = ServeSettings(model="fake", engine_only=True)
    servers = [ServerThread(build_app(e, settings), free_port()) for e in engines]
    for server in servers:
        server.start()
    try:
        urls = [f"http://127.0.0.1:{s.server.config.port}" for s in servers]
        knowing, blank = replay_paired(urls, [case], 100, lambda _: None)
    finally:
        for server, engine in zip(servers, engines, strict=True):
            server.stop()
            engine.close()
    assert len(knowing) == len(blank) == len(list(pauses(case, 100)))
    assert summary(knowing)["acceptance"] == 1.0 and summary(blank)["acceptance"] == 0.0


def test_the_requests_per_function_can_be_set_and_a_bad_count_is_refused():
    from typer.testing import CliRunner

    from whiz.cli import app

    runner = CliRunner()
    assert "--requests" in runner.invoke(app, ["bench", "complete", "--help"]).output
    refused = runner.invoke(app, ["bench", "complete", "--requests", "0"])
    assert refused.exit_code == 2 and "--requests" in refused.output
