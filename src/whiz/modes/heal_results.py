"""A heal's candidates and how they are judged: each candidate's result, the order that picks a
winner (passing, then the smallest diff, then the fewest tokens), the failure worth feeding back,
and what the model is told about it. `healing.py` makes and tests them; these only compare."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from whiz.agent.editing.edits import FileChange, unified_diff
from whiz.agent.runs_check import shown
from whiz.environments.local import truncate
from whiz.modes.candidates import Generation
from whiz.modes.pool import Label

Status = Literal[
    "passed", "failed", "timeout", "tests_changed", "malformed", "no_edit", "duplicate", "cancelled"
]
FEEDBACK_OUTPUT_CHARS = 3000


@dataclass
class CandidateResult:
    """One candidate: its reply, its edits, and what the tests said in its copy."""

    round: int
    index: int
    text: str
    output_tokens: int
    status: Status
    changes: list[FileChange] = field(default_factory=list)
    diff: str = ""
    diff_lines: int = 0
    exit_code: int | None = None
    test_output: str = ""
    test_ms: float = 0.0
    error: str = ""
    """Why the edit could not be applied (malformed), or why the copy failed."""
    same_as: int | None = None
    """The candidate with the same edit, whose test run this one shares."""
    as_written: bool = False
    """Its text is edit blocks that apply as they stand (no whole files, no paths corrected)."""
    unchanged: bool = False
    """It has edits, and they change nothing: the code written back as it is (`no_edit`)."""
    failure: str = ""
    """What its failing tests said, trimmed (`test_feedback.failure_summary`)."""
    tests_passed: int | None = None
    """How many tests passed in its run, where the runner says (`test_feedback.count_passed`)."""
    checks_failed: bool = False
    """Its tests passed, but the checks the code holds, run beside them (`Healer.guard`), did not:
    it fails, and is applied only where no candidate passes both."""
    finish_reason: str = "stop"
    """Why its reply ended, as the candidate source said: "stop", "length" where it ran to the
    token limit (cut off), "loop" where it was caught in one (`repetition.looping`)."""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def reply(self) -> str:
        """The candidate as a reply the agent applies: its own text where that parses as these edits
        (SEARCH/REPLACE, patches), else the changes written out as SEARCH/REPLACE blocks."""
        if self.as_written:
            return self.text
        return "".join(as_search_replace(c) for c in self.changes)

    def item(self) -> dict[str, Any]:
        """The `heal_candidate` item's fields."""
        return {
            "round": self.round,
            "index": self.index,
            "status": self.status,
            "diff_lines": self.diff_lines,
            "output_tokens": self.output_tokens,
            "exit_code": self.exit_code,
            "test_output": truncate(self.test_output, 2000),
            "error": self.error,
            "diff": self.diff,
            "same_as": self.same_as,
            "failure": self.failure,
            "tests_passed": self.tests_passed,
            "checks_failed": self.checks_failed,
            # A candidate with no edit to show is shown by what it said instead.
            "reply": truncate(self.text, 2000) if self.status in ("no_edit", "malformed") else "",
        }


def as_search_replace(change: FileChange) -> str:
    """One file's change as a SEARCH/REPLACE block: the whole old text for the whole new one."""
    before = change.before or ""
    after = change.after or ""
    end = "" if not after or after.endswith("\n") else "\n"
    start = "" if not before or before.endswith("\n") else "\n"
    return f"{change.path}\n<<<<<<< SEARCH\n{before}{start}=======\n{after}{end}>>>>>>> REPLACE\n"


def selection_key(result: CandidateResult) -> tuple[int, int, int, int]:
    """Passing first, then the smallest diff, then the fewest tokens, then the earliest."""
    return (0 if result.passed else 1, result.diff_lines, result.output_tokens, result.index)


def pick_best(results: list[CandidateResult], *, passing: bool = True) -> CandidateResult | None:
    """The winner among passing candidates (`passing` False: among all of `results`); None when
    there is none."""
    among = [r for r in results if r.passed or not passing]
    return min(among, key=selection_key) if among else None


_FAILURE_RANK = {
    "failed": 0, "timeout": 1, "tests_changed": 2, "malformed": 3, "no_edit": 4, "duplicate": 5,
    "cancelled": 6,
}  # fmt: skip


def best_failure(results: list[CandidateResult]) -> CandidateResult | None:
    """The failure most worth feeding back: an edit that applied and ran, to code that parses,
    with the most tests passing, small, short. Code that does not even parse is furthest from
    working: smallest first, the closest attempt at "Write wc.py" was the one line `python wc.py
    sample.txt`, not the program that failed on a missing import."""
    failed = [r for r in results if not r.passed]
    if not failed:
        return None
    return min(
        failed,
        key=lambda r: (
            _FAILURE_RANK[r.status],
            not r.checks_failed,
            unparsed(r),
            -(r.tests_passed or 0),
            r.diff_lines,
            r.output_tokens,
            r.index,
        ),  # fmt: skip
    )


def unparsed(result: CandidateResult) -> bool:
    """Whether the candidate's tests failed on a syntax error (its code does not parse)."""
    return any(f"{kind}Error:" in result.test_output for kind in ("Syntax", "Indentation", "Tab"))


def diff_size(changes: list[FileChange]) -> int:
    """Lines added plus lines removed, over all files."""
    count = 0
    for change in changes:
        for line in unified_diff(change).splitlines():
            if line[:1] in "+-" and not line.startswith(("+++", "---")):
                count += 1
    return count


def feedback(result: CandidateResult, test_cmd: str) -> str:
    """What the model reads after a failed candidate: what went wrong, and that nothing changed."""
    if result.status in ("failed", "timeout"):
        what = "timed out" if result.status == "timeout" else f"failed (exit code {result.exit_code})"
        output = (result.failure or truncate(result.test_output, FEEDBACK_OUTPUT_CHARS)).rstrip()
        return (
            f"That edit was tried in a copy of the project, and the tests (`{shown(test_cmd)}`) {what}:\n"
            f"```\n{output}\n```\n"
            "The project's files are unchanged: they are still as shown above. "
            "Write a corrected edit as SEARCH/REPLACE blocks."
        )
    if result.status == "tests_changed":
        return (
            f"That edit was not tried: {result.error}. The tests are the specification; "
            "the project's files are unchanged. Write an edit of the code under test, as "
            "SEARCH/REPLACE blocks, that makes the tests pass as they are."
        )
    if result.status == "malformed":
        return f"That edit could not be applied: {result.error}\nWrite it again as SEARCH/REPLACE blocks."
    return "That reply made no change. Write the edit as SEARCH/REPLACE blocks."


def creates_file(result: CandidateResult) -> bool:
    """Whether a candidate writes a file that did not exist (a new program, say)."""
    return any(c.before is None and c.after is not None for c in result.changes)


def told_without_reply(
    messages: list[dict[str, Any]], failure: CandidateResult, test_cmd: str
) -> list[dict[str, Any]]:
    """The conversation with the feedback on the best failure added to its last message, and the
    failing reply itself left out: the 0.5B copies a reply it can see (in auto's ladder, its three
    sampled candidates after the deep model's reply were that reply, token for token)."""
    note = feedback(failure, test_cmd).replace("That ", "An earlier ", 1)
    last = messages[-1] if messages else {}
    if last.get("role") != "user" or not isinstance(last.get("content"), str):
        return [*messages, {"role": "user", "content": note}]
    return [*messages[:-1], {**last, "content": f"{last['content']}\n\n{note}"}]


@dataclass
class RoundResult:
    round: int
    mode: Label
    generation: Generation
    results: list[CandidateResult]
    cut_short: bool = False
    """The heal's time budget ended this round's draws before the round had drawn all it would."""

    @property
    def best(self) -> CandidateResult | None:
        return pick_best(self.results)


@dataclass
class HealOutcome:
    """Every round, and the winner (None when no candidate passed)."""

    rounds: list[RoundResult]
    best: CandidateResult | None
    escalated: bool = False
    out_of_time: bool = False
    """The heal stopped at its time budget (`HealSettings.budget_s`) with rungs left to climb, or
    with a repair stage's draws left to draw."""

    @property
    def results(self) -> list[CandidateResult]:
        return [r for rnd in self.rounds for r in rnd.results]

    def summary(self) -> dict[str, Any]:
        return {
            "passed": self.best is not None,
            "rounds": len(self.rounds),
            "candidates": len(self.results),
            "winner": None if self.best is None else {"round": self.best.round, "index": self.best.index},
            "escalated": self.escalated,
            "out_of_time": self.out_of_time,
            "decode_ms": sum(r.generation.wall_ms for r in self.rounds),
        }
