"""Auto mode puts the deep model where it pays: a change of behaviour or a new program starts deep,
a rename starts fast, a failed run of the tests moves the turn to deep at once (saying why), and a
deep model that cannot be had leaves the fast one answering, said once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.modes.test_modes import GREET, RENAME, items, run_exec
from whiz.agent.events import Collector
from whiz.agent.intent import change_kind
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.modes.endpoints import DeepSettings, FastSettings
from whiz.modes.notices import ItemEmitter
from whiz.modes.pool import DeepMissing, ModelPool, ScriptedPool, not_installed
from whiz.modes.registry import Label, Mode
from whiz.modes.router import ModeRouter

FIX = 'greet.py\n<<<<<<< SEARCH\n    return "Hello, " + name\n=======\n    return "Hello, " + name + "!"\n>>>>>>> REPLACE\n'  # noqa: E501
BANG_CHECK = "from greet import say_hello\nassert say_hello('x') == 'Hello, x!', say_hello('x')\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "greet.py").write_text(GREET)
    return root


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        ("Rename say_hello to greet in greet.py", "mechanical"),
        ("Move parse into utils.py", "mechanical"),
        ("Add a docstring to mean", "mechanical"),
        ("Fix the typo in the error message", "mechanical"),
        ("Fix the bug in mean so the tests pass.", "behaviour"),
        ("Write a complete, playable Snake game in Python using Pygame in snake.py.", "behaviour"),
        ("Change the function so that it also removes README.md files", "behaviour"),
        ("Rename the function and fix the bug", "behaviour"),
        ("Add the decorator `@log_calls` to the function `add_type`.", "mechanical"),
        ("The function should calculate h-index instead. Rename the function to h_index.", "behaviour"),
        ("Sort the list before returning it, and fix the comments.", "behaviour"),
        # Requests for new behaviour often name no verb of change at all.
        ("Ignore invalid inputs. Zeros should be skipped in the product.", "behaviour"),
        ("In edit_2.py: Return all longest strings as a list.", "behaviour"),
        ("Check if the input can form a triangle; if it cannot, return -1.", "behaviour"),
        ("Find and fix the bug in mean", "behaviour"),
        ("What does greet.py do?", None),
        ("explain the rename", None),
        ("Find the bug in mean", None),
        ("Run the tests", None),
    ],
)
def test_a_task_is_read_as_a_change_of_behaviour_a_mechanical_edit_or_no_change(task, kind):
    assert change_kind(task) == kind


def test_in_auto_mode_a_change_of_behaviour_starts_with_the_deep_model_and_says_why(project):
    fast = ScriptedModel(["never asked"])
    pool = ScriptedPool(clients={"fast": lambda: fast, "deep": lambda: ScriptedModel([FIX])})
    code, events, _ = run_exec(project, pool, "Fix say_hello in greet.py so it ends with !", mode="auto")
    assert code == 0 and fast.requests == []
    (change,) = items(events, "mode_change")
    assert (change["from"], change["to"], change["trigger"]) == ("fast", "deep", "task")
    assert "change of behaviour" in change["reason"]
    assert (project / "greet.py").read_text().endswith('name + "!"\n')


def test_in_auto_mode_a_rename_starts_with_the_fast_model(project):
    deep = ScriptedModel(["never asked"])
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel([RENAME]), "deep": lambda: deep})
    code, events, _ = run_exec(project, pool, "Rename say_hello to greet in greet.py", mode="auto")
    assert code == 0 and deep.requests == [] and pool.opened == ["fast"]
    assert items(events, "mode_change") == []


def test_the_first_failed_test_run_moves_the_turn_to_the_deep_model_at_once_with_the_reason(project):
    (project / "check.py").write_text(BANG_CHECK)
    # The fast model's rename leaves the tests failing; its next reply is never asked for.
    fast = ScriptedModel([RENAME.replace("greet(name)", "say_hello(name, extra=None)"), "never asked"])
    deep = ScriptedModel([FIX])
    pool = ScriptedPool(clients={"fast": lambda: fast, "deep": lambda: deep})
    test_cmd = f"{sys.executable} check.py"
    code, events, _ = run_exec(
        project, pool, "Rename say_hello's argument in greet.py", mode="auto", test_cmd=test_cmd, heal=0
    )
    assert code == 0, events[-1]
    (change,) = items(events, "mode_change")
    assert (change["to"], change["trigger"]) == ("deep", "tests_failed")
    assert "check.py` failed (exit 1)" in change["reason"] and "Hello, x" in change["reason"]
    assert len(fast.requests) == 1 and len(deep.requests) == 1
    runs = items(events, "command_execution")
    assert [r["exit_code"] for r in runs] == [1, 0]


def test_fast_mode_does_not_move_on_a_failed_test_run(project):
    (project / "check.py").write_text(BANG_CHECK)
    fast = ScriptedModel([FIX])
    pool = ScriptedPool(clients={"fast": lambda: fast, "deep": lambda: ScriptedModel(["never"])})
    code, events, _ = run_exec(
        project, pool, "Fix say_hello", mode="fast", test_cmd=f"{sys.executable} check.py"
    )
    assert code == 0 and items(events, "mode_change") == [] and pool.opened == ["fast"]


def missing_deep() -> ScriptedModel:
    raise DeepMissing("qwen2.5-coder-1.5b is not installed")


def test_a_deep_model_that_is_not_installed_leaves_the_fast_model_answering_said_once(project):
    (project / "check.py").write_text(BANG_CHECK)
    fast = ScriptedModel([RENAME.replace("greet(name)", "say_hello(name, extra=None)"), FIX])
    pool = ScriptedPool(clients={"fast": lambda: fast, "deep": missing_deep})
    test_cmd = f"{sys.executable} check.py"
    task = "Fix say_hello in greet.py so it ends with !"
    code, events, _ = run_exec(project, pool, task, mode="auto", test_cmd=test_cmd, heal=0)
    assert code == 0 and len(fast.requests) == 2
    # Said once: the failed test run after it moves nothing (there is no deep model to move to).
    to_deep, back = items(events, "mode_change")
    assert (to_deep["to"], back["to"], back["trigger"]) == ("deep", "fast", "deep_unavailable")
    assert "not installed" in back["reason"] and "whiz models pull qwen2.5-coder-1.5b" in back["reason"]
    assert sum("not installed" in json.dumps(e) for e in events) == 1


def test_deep_mode_does_not_fall_back_a_missing_deep_model_is_an_error(project):
    pool = ScriptedPool(clients={"fast": lambda: ScriptedModel(["never"]), "deep": missing_deep})
    code, _events, err = run_exec(project, pool, "Fix say_hello", mode="deep")
    assert code != 0 and "not installed" in err


def test_a_router_escalates_no_more_once_the_deep_model_could_not_be_had():
    collector = Collector()
    router = ModeRouter(ScriptedPool(), Mode.AUTO, ItemEmitter(collector))
    assert router.fall_back("qwen2.5-coder-1.5b is not installed")
    assert not router.escalate("stuck", "edit_failures") and router.current == Label.FAST
    router.start("Fix the bug in mean")
    router.observe_turn({"type": "turn.started"})
    assert router.current == Label.FAST
    assert [c["trigger"] for c in collector.items("mode_change")] == ["deep_unavailable"]
    assert not ModeRouter(ScriptedPool(), Mode.DEEP, ItemEmitter(collector)).fall_back("gone")


def test_a_pool_offers_the_local_deep_model_only_beside_whiz_s_own_fast_model():
    assert ModelPool(FastSettings(), DeepSettings()).offers(Label.DEEP)
    assert not ModelPool(FastSettings(base_url="http://vllm:8000"), DeepSettings()).offers(Label.DEEP)
    deep_upstream = DeepSettings(base_url="http://big:8000")
    assert ModelPool(FastSettings(base_url="http://vllm:8000"), deep_upstream).offers(Label.DEEP)


def test_a_model_not_installed_is_named_and_a_path_is_left_to_the_server(tmp_path):
    assert not_installed("qwen2.5-coder-1.5b", tmp_path) == "qwen2.5-coder-1.5b is not installed"
    assert not_installed(str(tmp_path / "mine.gguf"), tmp_path) is None


async def test_a_pool_says_at_once_that_the_deep_model_is_not_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    pool = ModelPool(FastSettings(), DeepSettings())
    with pytest.raises(DeepMissing, match="not installed"):
        await pool.endpoint(Label.DEEP)


def test_a_new_program_in_auto_mode_climbs_its_ladder_from_the_deep_models_most_likely_reply(project):
    from tests.modes.test_modes import HELLO, HELLO_CHECK, HELLO_WRONG, auto_ladder
    from whiz.modes.candidates import ScriptedCandidates

    (project / "check.py").write_text(HELLO_CHECK)
    fast = ScriptedCandidates([])
    deep = ScriptedCandidates([[HELLO_WRONG], [HELLO]])
    code, events, _ = auto_ladder(project, fast, deep, task="Write hello.py with hi()")
    assert code == 0, events[-1]
    assert fast.draws == [] and [d.greedy_first for d in deep.draws] == [True, False]
    assert deep.draws[1].seed is not None  # its samples are seeded, as a fast start's are
    assert [(c["to"], c["trigger"]) for c in items(events, "mode_change")] == [("deep", "task")]


async def test_the_deep_model_gets_a_background_server_of_its_own_beside_the_fast_one(tmp_path, monkeypatch):
    from whiz.server.background import BackgroundServers

    monkeypatch.setenv("WHIZ_HOME", str(tmp_path))
    said = []
    deep = DeepSettings(local_model="fake", draft_model=None, slots=3)
    pool = ModelPool(FastSettings(), deep, notice=said.append)
    servers = BackgroundServers(tmp_path)
    try:
        endpoint = await pool.endpoint(Label.DEEP)
        running = servers.find("fake")
        assert running is not None and endpoint.base_url == running.url
        assert "in the background" in endpoint.description and "in the background" in said[0]
        command = Path(f"/proc/{running.pid}/cmdline").read_bytes().split(b"\0")
        assert command[command.index(b"--slots") + 1] == b"3"
        await pool.close()  # the command ends; the server stays warm for the next one
        assert servers.find("fake") == running
        again = ModelPool(FastSettings(), deep, notice=said.append)
        assert (await again.endpoint(Label.DEEP)).base_url == running.url and len(said) == 1
    finally:
        servers.stop()


def test_deep_mode_starts_deep_whatever_the_task_and_whatever_the_pool_offers():
    collector = Collector()
    pool = ModelPool(FastSettings(base_url="http://vllm:8000"), DeepSettings())  # offers no deep
    router = ModeRouter(pool, Mode.DEEP, ItemEmitter(collector))
    for task in ("Rename x to y", "Fix the bug in mean"):
        router.start(task)
        router.observe_turn({"type": "turn.started"})
        assert router.current == Label.DEEP
        router.observe_turn({"type": "turn.completed"})
    auto = ModeRouter(pool, Mode.AUTO, ItemEmitter(collector))
    auto.start("Fix the bug in mean")
    auto.observe_turn({"type": "turn.started"})
    assert auto.current == Label.FAST and collector.items("mode_change") == []


def test_a_plain_whiz_exec_is_in_auto_mode_and_without_the_1_5b_says_so_once(tmp_path):
    import os
    import subprocess

    from whiz.server.background import BackgroundServers

    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "stats.py").write_text("def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n")
    env = {**os.environ, "WHIZ_HOME": str(tmp_path / "home"), "WHIZ_BASE_URL": "http://127.0.0.1:9"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "whiz", "exec", "--model", "fake", "Fix the bug in mean in stats.py"],
            cwd=tmp_path / "ws", env=env, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
    finally:
        BackgroundServers(tmp_path / "home").stop()
    err = done.stderr
    assert "mode fast -> deep: auto mode starts a change of behaviour with the deep model" in err, err
    assert err.count("the deep model cannot be had (qwen2.5-coder-1.5b is not installed)") == 1, err
    assert "whiz models pull qwen2.5-coder-1.5b" in err
