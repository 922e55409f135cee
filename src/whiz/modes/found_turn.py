"""A turn with no test command, judged by the checks the user already wrote.

Before the turn, `FoundTurn.prepare` finds the checks of the function the task is about
(`project/found_checks.py`) and, where the approval mode lets them run (`Approvals.found_checks`:
not in read-only), runs them once on the code as it is, in the agent's sandbox. A check that
could not run there (the module does not import, pytest collects nothing) is left out. Then:

- some check fails on the code as it is (`choose`): the checks are the turn's test command and,
  in a mode that heals, its healing step climbs a short ladder (`FOUND_HEAL_N` candidates: on
  code that exists, the deep model's rewrites of the function, greedy first), the first that
  passes winning, else the closest;
- every check passes (`guard`), and the task asks for a fix: they still run after the edit, and
  an edit that breaks them is sent back like one that fails the tests; nothing is healed, since
  they cannot tell a fix. Where the task asks for new behaviour instead (`passing`), they are
  not used: the user's examples of the old behaviour may rightly change with it;
- nothing found, nothing runnable, or not allowed to run: the turn is as it would be, and says so.

With a test command (`beside`), a task that asks for a fix keeps its found checks beside it: the
test command is the user's few cases, the checks the code holds are more of them, so a candidate
that passes the command but breaks them (a special case that satisfies the visible tests) is not
a pass while another candidate may keep them (`Healer.guard`). The repository's tests in files
the command runs already count there and are left out, as are all of them where it names no file.

A task that changes no behaviour (a rename, formatting: `intent.change_kind`) gets no found
checks at all: a check that calls the function by its old name would fail a correct rename.

After the turn, `finish` runs the checks on what the turn left, and the `found_checks` item and
the turn's message say which checks ran and how they came out.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from whiz.agent.approvals import Approvals
from whiz.agent.found_checks_run import command, verdicts
from whiz.agent.intent import change_kind, prose_words
from whiz.agent.project.found_checks import FoundChecks, find_checks
from whiz.agent.project.test_files import named_paths
from whiz.agent.project.workspace import Workspace
from whiz.agent.runs_check import shown
from whiz.environments import Environment

FOUND_HEAL_N = 4
"""Candidates of a turn the found checks choose for: the greedy rewrite and three sampled ones.
Fewer than a test command's eight: these checks are a few examples, cheaper to satisfy by
accident, and a plain turn's time target is half a tested one's."""
FOUND_HYPOTHESES = 3
"""Hypotheses of what is wrong drawn together after a rewrite wrote the function back
(`HealSettings.hypotheses`), each driving a later rewrite, the checks choosing among them."""
BASELINE_TIMEOUT_S = 60.0
"""How long the run of the checks on the code as it is may take before they are not used."""

Status = Literal["none", "not_run", "unusable", "choose", "guard", "passing", "beside"]
FIX_WORDS = frozenset(
    {"fix", "fixes", "bug", "bugs", "buggy", "broken", "wrong", "incorrect", "error", "crash"}
)
"""Words that say a task asks for a fix: where the found checks all pass, they guard it."""


def asks_fix(task: str) -> bool:
    """Whether `task` asks for a fix (`FIX_WORDS`), not for new behaviour."""
    return bool(FIX_WORDS & set(prose_words(task)))


@dataclass
class FoundTurn:
    """The checks found for one turn, and what became of them."""

    found: FoundChecks
    status: Status
    reason: str
    before: dict[str, str] = field(default_factory=dict)
    """Each check's verdict on the code as it was: pass, fail or error."""
    after: dict[str, str] | None = None
    """Each usable check's verdict on what the turn left (None: not run)."""
    command: str | None = None
    """The usable checks as a test command (None: none runs)."""
    seconds: float = 0.0
    """How long the run on the code as it was took."""
    output: str = ""
    """What that run printed."""

    @property
    def runs(self) -> bool:
        return self.command is not None

    @property
    def chooses(self) -> bool:
        return self.status == "choose"

    @classmethod
    async def prepare(
        cls, ws: Workspace, task: str, approvals: Approvals, env: Environment, test_cmd: str | None = None
    ) -> FoundTurn:
        """Find the checks of the function `task` is about and run them once on the code as it is;
        with `test_cmd`, only for a fix, as checks beside it (`beside`)."""
        if change_kind(task) != "behaviour":
            return cls(FoundChecks(), "none", "the task changes no behaviour")
        if test_cmd and not asks_fix(task):
            return cls(FoundChecks(), "none", "the task asks for new behaviour, and the tests say what it is")
        found = await asyncio.to_thread(find_checks, ws, task)
        if test_cmd:
            found = not_run_by(found, test_cmd)
        if not found:
            return cls(found, "none", "no checks of the function the task names were found in the code")
        allowed = approvals.found_checks()
        if not allowed.allowed:
            return cls(found, "not_run", allowed.reason)
        python = workspace_python(ws.root)
        done = await env.run(command(found.spec(python), python), timeout_s=BASELINE_TIMEOUT_S)
        before = verdicts(done.output) or {}
        usable = {where for where, verdict in before.items() if verdict in ("pass", "fail")}
        turn = cls(found, "unusable", "", before=before, seconds=done.duration_ms / 1000, output=done.output)
        if not usable:
            last = next((ln for ln in reversed(done.output.splitlines()) if ln.strip()), "")
            why = "ran out of time" if done.timed_out else f"could not run ({last[:160]})"
            turn.reason = f"the checks found in the code {why} on the code as it is"
            return turn
        kept = found.only(usable)
        turn.command = command(kept.spec(python), python)
        failing = sorted(w for w in usable if before[w] == "fail")
        if test_cmd:
            turn.status = "beside"
            turn.reason = (
                f"{len(usable)} run beside `{shown(test_cmd)}` ({len(failing)} fail on the code as it is): "
                "a candidate that passes it must pass them too"
            )
        elif failing:
            turn.status = "choose"
            turn.reason = f"{len(failing)} of {len(usable)} fail on the code as it is: they choose the edit"
        elif asks_fix(task):
            turn.status = "guard"
            turn.reason = f"all {len(usable)} pass on the code as it is: an edit must keep them passing"
        else:
            turn.status, turn.command = "passing", None
            turn.reason = (
                f"all {len(usable)} pass on the code as it is, and the task asks for new behaviour, "
                "which they need not hold: not used"
            )
        return turn

    async def finish(self, env: Environment) -> None:
        """Run the usable checks on what the turn left (`after`)."""
        if self.command is None:
            return
        done = await env.run(self.command, timeout_s=BASELINE_TIMEOUT_S)
        self.after = verdicts(done.output) or {w: "fail" for w in self.usable()}

    def usable(self) -> list[str]:
        return [w for w, v in self.before.items() if v in ("pass", "fail")]

    def item(self) -> dict[str, Any]:
        """The `found_checks` item's fields: what the checks are used for (`use`: not_run, unusable,
        choose, guard or passing) and why, and every check found with its verdicts before and
        after the turn."""
        checks = []
        for check in self.found.item():
            where = check["where"]
            before = self.before.get(where)
            after = None if self.after is None else self.after.get(where)
            checks.append({**check, "before": before, "after": after})
        fields = {
            "use": self.status,
            "reason": self.reason,
            "ran": bool(self.before),
            "label": self.found.label(),
        }
        return {**fields, "checks": checks}

    def summary(self) -> str:
        """The line the turn's message ends with: which checks ran and how they came out."""
        label = self.found.label()
        if not self.before:
            return f"checks found in the code ({label}) not run: {self.reason}"
        if not self.runs:
            return f"checks found in the code ({label}): {self.reason}"
        if self.after is None:
            return f"checks found in the code ({label}): {self.reason}"
        passed = sum(v == "pass" for v in self.after.values())
        failing = [w for w, v in self.after.items() if v != "pass"]
        line = f"checks found in the code: {passed} of {len(self.after)} pass ({label})"
        return line + (f"; failing: {', '.join(failing[:5])}" if failing else "")


def not_run_by(found: FoundChecks, test_cmd: str) -> FoundChecks:
    """The found checks less the repository's tests `test_cmd` runs itself: those in the files or
    folders it names, or all of them where it names none (`pytest -q` runs them all)."""
    named = named_paths(test_cmd)

    def runs(where: str) -> bool:
        path = where.split("::", 1)[0]
        return not named or any(path == n or path.startswith(n.rstrip("/") + "/") for n in named)

    return found.only({c.where for c in found.checks if c.kind != "test" or not runs(c.where)})


def workspace_python(root: Path) -> str:
    """The Python that runs the checks (the runner needs only the standard library) and the
    repository's tests: the workspace's own virtual environment's, where it has one, so the
    code's imports resolve as the user's do; else whiz's."""
    for folder in (".venv", "venv"):
        candidate = root / folder / "bin" / "python"
        if candidate.is_file():
            return str(candidate)
    return sys.executable
