"""Healing from the web app: POST /heal, GET /candidates, accepting a candidate, cancel, bad input.

The model is the fake engine (its reply is a function of the conversation, so every candidate of
one round is the same edit) or, where candidates must differ, scripted candidates.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from whiz.agent.editing.undo import UndoStore
from whiz.agent.project.workspace import Workspace
from whiz.modes.candidates import ScriptedCandidates
from whiz.web.heal import HealBody, HealService
from whiz.web.workspace import WorkspaceService

from .conftest import whole_file_reply

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a * b\n"
# Quicker than pytest, and as telling: exit 1 with the assertion's traceback when add is wrong.
CHECK = f"{shlex.quote(sys.executable)} -c 'from calc import add; assert add(1, 2) == 3, add(1, 2)'"
TASK = "Fix add in calc.py so that the tests pass."


@pytest.fixture
def buggy(workspace: Path) -> Path:
    (workspace / "calc.py").write_text(BUGGY)
    return workspace


def heal(client, **body):
    return client.post("/whiz/workspace/heal", json={"task": TASK, **body})


def wait_done(client, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = client.get("/whiz/workspace/candidates").json()
        if got["heal"] and got["heal"]["status"] != "running":
            return got
        time.sleep(0.05)
    raise AssertionError("the heal did not finish")


def test_every_candidate_shows_its_test_result_and_accepting_the_chosen_one_applies_it(make_client, buggy):
    client = make_client(whole_file_reply("calc.py", FIXED), workspace=buggy, test_cmd=CHECK)
    started = heal(client, n=3, all_candidates=True)
    assert started.status_code == 202, started.text
    assert started.json()["heal"]["status"] == "running"

    done = wait_done(client)
    job, candidates = done["heal"], done["candidates"]
    assert job["status"] == "completed" and job["n"] == 3
    assert job["baseline"]["exit_code"] == 1 and "AssertionError" in job["baseline"]["output"]
    assert "candidate 0 is chosen" in job["phase"]
    assert len(candidates) == 3
    first = candidates[0]
    assert first["status"] == "passed" and first["exit_code"] == 0 and first["chosen"]
    assert "-    return a - b" in first["diff"] and "+    return a + b" in first["diff"]
    assert first["diff_lines"] == 2 and first["output_tokens"] > 0
    # The same edit three times is tested once; the others say whose run they share.
    assert [c["same_as"] for c in candidates[1:]] == [0, 0]
    assert [c["status"] for c in candidates] == ["passed"] * 3
    assert job["winner"] == first["id"]
    assert (buggy / "calc.py").read_text() == BUGGY  # tested in copies, nothing applied

    edit_id = first["edit"]["id"]
    assert first["edit"]["state"] == "pending"
    assert client.post("/whiz/workspace/accept", json={"id": edit_id}).json() == {"applied": ["calc.py"]}
    assert (buggy / "calc.py").read_text() == FIXED
    after = client.get("/whiz/workspace/candidates").json()["candidates"]
    assert after[0]["edit"]["state"] == "accepted"
    assert client.post("/whiz/workspace/accept", json={"id": edit_id}).status_code == 404  # once only
    # A twin was planned against the old file: accepting it now is refused, not a second write.
    twin = client.post("/whiz/workspace/accept", json={"id": after[1]["edit"]["id"]})
    assert twin.status_code == 409 and (buggy / "calc.py").read_text() == FIXED

    assert client.post("/whiz/workspace/undo", json={}).json() == {"restored": ["calc.py"]}
    assert (buggy / "calc.py").read_text() == BUGGY
    # Undone, the card offers the candidate again instead of still saying "accepted".
    reopened = client.get("/whiz/workspace/candidates").json()["candidates"][0]
    assert reopened["edit"] == {"id": edit_id, "state": "pending"}
    assert client.post("/whiz/workspace/accept", json={"id": edit_id}).json() == {"applied": ["calc.py"]}
    assert (buggy / "calc.py").read_text() == FIXED


def test_when_no_candidate_passes_the_failure_goes_back_for_a_second_round(make_client, buggy):
    def model(conversation: str) -> str:
        # Wrong at first; right once it has read why its edit failed.
        fixed = "the tests (`" in conversation and "failed (exit code 1)" in conversation
        return f"calc.py\n```python\n{FIXED if fixed else WRONG}```"

    client = make_client(model, workspace=buggy, test_cmd=CHECK)
    assert heal(client, n=2).status_code == 202
    done = wait_done(client)
    rounds = [(c["round"], c["status"]) for c in done["candidates"]]
    assert rounds == [(1, "failed"), (1, "failed"), (2, "passed"), (2, "passed")]
    failed = done["candidates"][0]
    assert failed["exit_code"] == 1 and "AssertionError: 2" in failed["test_output"]
    assert [r["passed"] for r in done["heal"]["rounds"]] == [0, 2]
    assert done["heal"]["winner"] == done["candidates"][2]["id"]


def test_a_heal_where_nothing_passes_says_so_and_changes_nothing(make_client, buggy):
    client = make_client(whole_file_reply("calc.py", WRONG), workspace=buggy, test_cmd=CHECK)
    assert heal(client, n=2, rounds=1).status_code == 202
    done = wait_done(client)
    assert done["heal"]["status"] == "completed" and done["heal"]["winner"] is None
    assert "no candidate passed" in done["heal"]["phase"]
    assert [c["status"] for c in done["candidates"]] == ["failed", "failed"]
    assert not any(c["chosen"] for c in done["candidates"])
    assert (buggy / "calc.py").read_text() == BUGGY


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "task"),
        ({"task": "   "}, "task"),
        ({"task": TASK, "n": 0}, "n"),
        ({"task": TASK, "n": 9}, "n"),
        ({"task": TASK, "n": 5}, "n"),  # the fake engine decodes 4 at once
        ({"task": TASK, "n": "3"}, "n"),
        ({"task": TASK, "temperature": 3}, "temperature"),
        ({"task": TASK, "rounds": 0}, "rounds"),
        ({"task": TASK, "max_tokens": 5}, "max_tokens"),
        ({"task": TASK, "all_candidates": "yes"}, "all_candidates"),
        ({"task": TASK, "bogus": 1}, "bogus"),
    ],
)
def test_bad_heal_requests_get_a_clear_error_and_start_nothing(make_client, buggy, body, param):
    client = make_client(whole_file_reply("calc.py", FIXED), workspace=buggy, test_cmd=CHECK)
    got = client.post("/whiz/workspace/heal", json=body)
    assert got.status_code == 400, got.text
    error = got.json()["error"]
    assert error["param"] == param and error["message"]
    assert client.get("/whiz/workspace/candidates").json() == {"heal": None, "candidates": []}
    assert (buggy / "calc.py").read_text() == BUGGY


def test_healing_needs_a_test_command(make_client, buggy):
    client = make_client(whole_file_reply("calc.py", FIXED), workspace=buggy)
    got = heal(client)
    assert got.status_code == 409
    assert got.json()["error"]["code"] == "no_test_command" and "--test-cmd" in got.json()["error"]["message"]
    assert client.get("/whiz/workspace/candidates").json()["heal"] is None


def sleeping(marker: str) -> list[int]:
    """Processes on this machine running `sleep <marker>` (the sandbox gives the test run its own
    process ids, so it is found by its command line)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes().split(b"\0")[:2] == [
                b"sleep",
                marker.encode(),
            ]:
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_one_heal_at_a_time_and_cancel_stops_its_test_run(make_client, buggy):
    # The baseline test run hangs, so the heal is still running when the next requests come.
    marker = f"61.{os.getpid()}"  # tells this run's test command from any other
    slow = f"touch started; exec sleep {marker}"
    client = make_client(whole_file_reply("calc.py", FIXED), workspace=buggy, test_cmd=slow)
    assert heal(client).status_code == 202
    deadline = time.monotonic() + 10
    while not (sleeping(marker) and (buggy / "started").exists()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sleeping(marker)

    second = heal(client)
    assert second.status_code == 409 and second.json()["error"]["code"] == "heal_running"
    # The server keeps answering while the heal runs.
    assert client.get("/whiz/workspace/files").status_code == 200
    running = client.get("/whiz/workspace/candidates").json()["heal"]
    assert running["status"] == "running" and "to see what fails" in running["phase"]

    cancelled = client.post("/whiz/workspace/heal/cancel", json={})
    assert cancelled.status_code == 200 and cancelled.json()["heal"]["status"] == "cancelled"
    deadline = time.monotonic() + 5
    while sleeping(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sleeping(marker) == []  # the test run was killed, not left behind
    again = client.post("/whiz/workspace/heal/cancel", json={})
    assert again.status_code == 409 and again.json()["error"]["code"] == "no_heal_running"
    assert heal(client).status_code == 202  # a new heal may start
    assert client.post("/whiz/workspace/heal/cancel", json={}).status_code == 200


def test_heal_routes_need_the_key_and_the_servers_own_origin(make_client, buggy):
    client = make_client(workspace=buggy, test_cmd=CHECK, api_keys=["k1"])
    assert heal(client).status_code == 401
    assert client.get("/whiz/workspace/candidates").status_code == 401
    evil = client.post(
        "/whiz/workspace/heal",
        json={"task": TASK},
        headers={"Authorization": "Bearer k1", "Origin": "http://evil.example"},
    )
    assert evil.status_code == 403 and evil.json()["error"]["code"] == "origin_not_allowed"
    plain = client.post(
        "/whiz/workspace/heal",
        content=b'{"task": "x"}',
        headers={"Authorization": "Bearer k1", "Content-Type": "text/plain"},
    )
    assert plain.status_code == 400
    empty = client.get("/whiz/workspace/candidates", headers={"Authorization": "Bearer k1"})
    assert empty.json() == {"heal": None, "candidates": []}


async def test_the_chosen_candidate_passes_with_the_smallest_diff(buggy):
    long_fix = "def add(a, b):\n    # fixed\n    total = a + b\n    return total\n"
    source = ScriptedCandidates(
        [[f"calc.py\n```python\n{text}```" for text in (WRONG, long_fix, FIXED, BUGGY)]]
    )
    service = WorkspaceService(
        Workspace(buggy), UndoStore(buggy.parent / "undo"), proposer=None, test_cmd=CHECK
    )  # type: ignore[arg-type]
    heal = HealService(service, lambda model: source)
    job = heal.start(HealBody(task=TASK, n=4, rounds=1, all_candidates=True))
    await job.task
    by_index = {c["index"]: c for c in heal.candidates()}
    assert [by_index[i]["status"] for i in range(4)] == ["failed", "passed", "passed", "no_edit"]
    assert by_index[2]["chosen"] and not by_index[1]["chosen"]  # both pass; 2 changes fewer lines
    assert by_index[3]["edit"] is None  # the file as it was: nothing to accept
    assert sorted(service.offered) == sorted(by_index[i]["id"] for i in range(3))
    assert service.accept(by_index[2]["edit"]["id"]) == ["calc.py"]
    assert (buggy / "calc.py").read_text() == FIXED
