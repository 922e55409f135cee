"""Approval modes: read-only changes nothing, auto-edit asks before commands, full-auto does not."""

from __future__ import annotations

from pathlib import Path

from tests.agent.conftest import GREET, Harness, sr
from whiz.agent.approvals import Approvals, ScriptedApprover
from whiz.agent.models.scripted_model import Reply


async def test_read_only_refuses_edits_and_commands(project: Path) -> None:
    edit = sr("greet.py", "def say_hello(name):", "def greet(name):")
    h = Harness(project, [edit, "RUN touch ran.txt", "ok"], approval="read-only")
    result = await h.agent.run("Rename say_hello to greet")
    assert (project / "greet.py").read_text() == GREET
    assert not (project / "ran.txt").exists()
    assert "read-only" in h.model.requests[1].items[-1]["content"]
    assert "read-only" in h.model.requests[2].items[-1]["content"]
    assert [c["status"] for c in h.events.items("file_change")] == ["declined"]
    assert result.ok
    assert "read-only" in h.agent.instructions


async def test_auto_edit_asks_before_a_command_and_respects_no(project: Path) -> None:
    approver = ScriptedApprover([False])
    h = Harness(project, ["RUN touch ran.txt", "fine"], approvals=Approvals("auto-edit", approver))
    await h.agent.run("make ran.txt")
    assert [r.detail for r in approver.asked] == ["touch ran.txt"]
    assert not (project / "ran.txt").exists()
    assert "did not approve" in h.model.requests[1].items[-1]["content"]
    assert h.events.items("command_execution")[0]["status"] == "declined"


async def test_auto_edit_runs_an_approved_command_and_applies_edits_unasked(project: Path) -> None:
    approver = ScriptedApprover([True])
    replies = ["RUN touch ran.txt", sr("greet.py", "def say_hello(name):", "def greet(name):")]
    h = Harness(project, replies, approvals=Approvals("auto-edit", approver))
    result = await h.agent.run("make ran.txt, then rename")
    assert result.ok
    assert (project / "ran.txt").exists()
    assert len(approver.asked) == 1  # the edit was not put to the user
    assert (project / "greet.py").read_text().startswith("def greet")


async def test_full_auto_runs_commands_without_asking(project: Path) -> None:
    approver = ScriptedApprover([])
    h = Harness(project, ["RUN echo hi > ran.txt", "done"], approvals=Approvals("full-auto", approver))
    await h.agent.run("make ran.txt")
    assert approver.asked == []
    assert (project / "ran.txt").read_text() == "hi\n"
    [command] = h.events.items("command_execution")
    assert command["exit_code"] == 0 and command["status"] == "completed"


async def test_full_auto_commands_time_out(project: Path) -> None:
    h = Harness(project, ["RUN sleep 20", "gave up"], approval="full-auto", command_timeout_s=0.3)
    result = await h.agent.run("sleep")
    assert result.ok
    assert "Timed out after 0.3 s" in h.model.requests[1].items[-1]["content"]


async def test_the_test_command_is_preapproved_in_auto_edit(project: Path) -> None:
    approver = ScriptedApprover([])
    h = Harness(project, ["RUN true", "ok"], approvals=Approvals("auto-edit", approver, preapproved=["true"]))
    await h.agent.run("run the tests")
    assert approver.asked == []
    assert h.events.items("command_execution")[0]["status"] == "completed"


async def test_commands_refused_twice_are_not_offered_again_in_the_turn(project: Path) -> None:
    """Refused, a small model tries one command after another to the step limit: after the second
    refusal in a turn `run_command` leaves the offered tools, and it is back in the next turn."""

    def run(command: str) -> Reply:
        return Reply(calls=[("run_command", {"command": command})])

    script = [run("ls"), run("cat greet.py"), "It greets.", run("ls"), "done"]
    h = Harness(project, script, approval="read-only", actions="tools")
    assert (await h.agent.run("What does greet.py do?")).ok
    offered = [{t["name"] for t in r.tools} for r in h.model.requests]
    assert "run_command" in offered[0] and "run_command" in offered[1]  # one refusal: still offered
    assert "run_command" not in offered[2] and "read_file" in offered[2]
    assert "No more commands run in this turn" in h.model.requests[2].items[-1]["output"]
    assert [c["status"] for c in h.events.items("command_execution")] == ["declined", "declined"]
    assert (await h.agent.run("And now?")).ok
    assert "run_command" in {t["name"] for t in h.model.requests[3].tools}


async def test_a_command_after_two_refusals_is_not_put_to_the_user_again(project: Path) -> None:
    approver = ScriptedApprover([False, False])
    script = ["RUN ls", "RUN cat greet.py", "RUN pwd", "It greets."]
    h = Harness(project, script, approvals=Approvals("auto-edit", approver))
    assert (await h.agent.run("What does greet.py do?")).ok
    assert [r.detail for r in approver.asked] == ["ls", "cat greet.py"]
    assert [c["status"] for c in h.events.items("command_execution")] == ["declined"] * 3
    assert "No more commands run in this turn" in h.model.requests[3].items[-1]["content"]
