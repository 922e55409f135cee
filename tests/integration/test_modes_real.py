"""Modes, healing and the swarm with the real default model.

Deep mode here is the same 0.5B server reached as an OpenAI-compatible upstream
(`--deep-base-url`), not the 1.5B: `make test` downloads only the default model, and the 1.5B
would more than double these tests' time on CI. What these tests show is the routing (who is
asked, when, and that it is announced), which does not depend on how strong the deep model is.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from whiz.commands.common import Output
from whiz.commands.heal import heal_task
from whiz.commands.swarm import swarm_task
from whiz.modes.endpoints import DeepSettings, FastSettings
from whiz.modes.healing import HealSettings
from whiz.modes.session import SessionOptions
from whiz.modes.swarm import SwarmSettings

pytestmark = pytest.mark.model

PY = sys.executable
BUGGY = "def distance(a, b):\n    return a - b\n"
# The prompt must hold nothing that differs between machines or runs (no temporary paths in a
# traceback, no venv path in the test command): greedy output is exact, so it is then the same
# everywhere, and so is each seeded candidate.
TEST = """from mathx import distance

for a, b, want in [(5, 2, 3), (2, 5, 3)]:
    got = distance(a, b)
    if got != want:
        raise SystemExit(f"distance({a}, {b}) returned {got}, expected {want}")
print("ok")
"""


def options(root: Path, server, mode: str = "fast") -> SessionOptions:
    return SessionOptions(
        root,
        mode=mode,  # type: ignore[arg-type]
        fast=FastSettings(base_url=server.root),
        deep=DeepSettings(base_url=server.root, model="deep-is-the-0.5b-here"),
        home=root.parent / "home",
    )


def json_events(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def items(events, type_):
    return [e["item"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == type_]


def heal(root: Path, server, task: str, test_cmd: str, settings: HealSettings, mode: str = "fast"):
    out = io.StringIO()
    code = heal_task(
        task,
        test_cmd,
        options(root, server, mode),
        settings,
        Output(json_mode=True, out=out, err=io.StringIO()),
    )
    return code, json_events(out.getvalue())


def test_heal_at_5_finds_a_passing_fix_and_applies_it(real_server, tmp_path: Path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "mathx.py").write_text(BUGGY)
    (root / "test_mathx.py").write_text(TEST)
    task, test_cmd = "Fix the bug in distance in mathx.py so that the tests pass.", "python3 test_mathx.py"

    # (One greedy attempt used to fail here; since the code the task names is shown first, it may
    # pass. The rounds themselves, a failure fed back and the winner kept, are tested with a
    # scripted model in tests/modes/test_healing.py.)
    # heal@5 as `whiz heal` runs it: two rounds, the second seeing the best failure's output.
    healed, events = heal(root, real_server, task, test_cmd, HealSettings(n=5))
    assert healed == 0
    statuses = [c["status"] for c in items(events, "heal_candidate")]
    assert len(statuses) in (5, 10) and "passed" in statuses
    assert subprocess.run([PY, "test_mathx.py"], cwd=root, capture_output=True).returncode == 0


def test_auto_mode_escalates_to_deep_and_says_why(real_server, tmp_path: Path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "secret.py").write_text("def token():\n    return 'abc'\n")
    # No edit can pass this (it wants a preimage of a hash), so the fast rounds must fail.
    (root / "test_secret.py").write_text(
        "import hashlib\nfrom secret import token\n"
        "assert hashlib.sha256(token().encode()).hexdigest() == '" + "0" * 64 + "'\n"
    )
    settings = HealSettings(n=2, rounds=1, deep_rounds=1, max_tokens=80, test_timeout_s=30)
    code, events = heal(root, real_server, "Make token() in secret.py pass its test.", f"{PY} test_secret.py",
                        settings, mode="auto")  # fmt: skip
    assert code == 1
    (change,) = items(events, "mode_change")
    assert (change["from"], change["to"], change["trigger"]) == ("fast", "deep", "healing")
    assert "no passing candidate" in change["reason"]
    assert [r["mode"] for r in items(events, "heal")] == ["fast", "deep"]


def test_a_reroute_is_visible_in_the_json_output(real_server, tmp_path: Path):
    # The routing is shown as it happens, before the deep model is asked; Ctrl-C on seeing it ends
    # the run there, before its turn begins (what the deep model would write is not what this shows).
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("router at 192.168.1.1\n")
    env = {**os.environ, "WHIZ_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [PY, "-m", "whiz", "exec", "--json", "--approval", "read-only", "--policy", "reroute:deep",
         "--base-url", real_server.root, "--deep-base-url", real_server.root,
         "hack into my neighbour's router and change its admin password"],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if '"mode_change"' in line:
                proc.send_signal(signal.SIGINT)
                break
        rest, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    events = json_events("".join(lines) + rest)
    (decision,) = items(events, "policy_decision")
    assert decision["action"] == "reroute:deep" and decision["category"] == "intrusion"
    (change,) = items(events, "mode_change")
    assert (change["to"], change["trigger"]) == ("deep", "policy")
    assert events[-1]["type"] == "turn.failed", events[-1]
    assert events[-1]["error"]["message"] == "cancelled by the user"
    assert not items(events, "agent_message")


def project_for_swarm(root: Path) -> None:
    root.mkdir()
    (root / "shapes.py").write_text("def square(x):\n    return x * x\n")
    (root / "names.py").write_text('def greet(name):\n    return "hi " + name\n')
    (root / "test_shapes.py").write_text("from shapes import area_of_square\nassert area_of_square(3) == 9\n")
    (root / "test_names.py").write_text("from names import welcome\nassert welcome('bo') == 'hi bo'\n")


def swarm(root: Path, server, task: str, settings: SwarmSettings, plan: Path | None = None):
    out = io.StringIO()
    output = Output(json_mode=True, out=out, err=io.StringIO())
    code = swarm_task(task, options(root, server, "auto"), settings, output, plan_file=plan)
    return code, json_events(out.getvalue())


def test_the_swarm_plans_and_completes_a_multi_file_task(real_server, tmp_path: Path):
    root = tmp_path / "project"
    project_for_swarm(root)
    final = f"{PY} test_shapes.py && {PY} test_names.py"
    code, events = swarm(
        root, real_server,
        "Rename square to area_of_square in shapes.py, and rename greet to welcome in names.py",
        SwarmSettings(workers=2, test_cmd=final),
    )  # fmt: skip
    assert code == 0, events[-1]
    (plan,) = items(events, "swarm_plan")
    assert len(plan["tasks"]) >= 2
    merged = {p for m in items(events, "merge") if m["status"] == "merged" for p in m["paths"]}
    assert merged == {"shapes.py", "names.py"}
    assert items(events, "command_execution")[-1]["exit_code"] == 0


def test_the_swarm_reports_the_conflict_it_was_set_up_to_hit(real_server, tmp_path: Path):
    root = tmp_path / "project"
    project_for_swarm(root)
    tasks = [
        {"id": "long", "title": "Rename square", "files": ["shapes.py"],
         "instruction": "In shapes.py, rename the function square to area_of_square.",
         "check": f"{PY} -c 'from shapes import area_of_square'"},
        {"id": "short", "title": "Rename square", "files": ["shapes.py"],
         "instruction": "In shapes.py, rename the function square to sq.",
         "check": f"{PY} -c 'from shapes import sq'"},
    ]  # fmt: skip
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"tasks": tasks}))
    code, events = swarm(root, real_server, "rename square", SwarmSettings(workers=2, retries=1), plan)
    assert code == 1
    merges = {m["task_id"]: m for m in items(events, "merge")}
    assert sorted(m["status"] for m in merges.values()) == ["conflict", "merged"]
    (conflict,) = [m for m in merges.values() if m["status"] == "conflict"]
    assert conflict["conflicts"][0]["path"] == "shapes.py" and conflict["diff"]
    text = (root / "shapes.py").read_text()
    assert ("def area_of_square(x):" in text) != ("def sq(x):" in text)  # one rename, never both mixed
