"""A new program judged only by "it runs" does not pass on a reply that ran on to the token limit
repeating itself; one merely cut short still does."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from whiz.agent.events import Collector
from whiz.agent.project.workspace import Workspace
from whiz.agent.runs_check import only_check, with_check
from whiz.modes.candidates import ScriptedCandidates
from whiz.modes.healing import Healer, HealSettings
from whiz.modes.notices import ItemEmitter
from whiz.modes.pool import ScriptedPool
from whiz.modes.router import ModeRouter

TASK = "Write roman.py: a function to_roman(n) that returns the Roman numeral of n, e.g. to_roman(4) == 'IV'."
CHECK = with_check(None, f"{sys.executable} -c 'import roman; print(roman.to_roman(4))'", 5)
# Ran on, one special case after another, until the token limit stopped it: what is there runs.
RAN_ON = "roman.py\n<<<<<<< SEARCH\n=======\ndef to_roman(n):\n    if n <= 3:\n        return 'I' * n\n"
RAN_ON += "".join(
    f"    elif n <= {k + 5}:\n        return 'X' + 'V' + 'I' * (n - {k})\n" for k in range(3, 300, 5)
)
# A long program cut short where it stopped, repeating nothing: a game the limit was too small for.
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]
FUNCTIONS = ["sqrt", "floor", "ceil", "fabs", "trunc", "exp", "log1p", "sqrt", "floor", "ceil", "fabs"]
CUT_SHORT = "roman.py\n<<<<<<< SEARCH\n=======\nimport math\n\n\n" + "".join(
    f"def rule_{word}(n):\n    # The {word} rule: {len(word) * 7} steps from {word[::-1]}.\n"
    f"    return math.{fn}(n + {i * 13 % 7}) * {i**2 + 3} - len({word!r})\n\n\n"
    for i, (word, fn) in enumerate(zip(WORDS, FUNCTIONS, strict=True))
)
CUT_SHORT += "def to_roman(n):\n    return str(rule_alpha(n))\n\n\ndef unfinished(board):\n    pass\n"
WHOLE = (
    "roman.py\n```python\ndef to_roman(n):\n    out = ''\n"
    "    for value, mark in [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'),\n"
    "                        (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]:\n"
    "        while n >= value:\n            out, n = out + mark, n - value\n    return out\n```\n"
)


def heal(tmp_path: Path, batches, test_cmd: str = CHECK):
    root = tmp_path / "project"
    root.mkdir()
    (root / "test_roman.py").write_text("from roman import to_roman\n\n\ndef test_four():\n    to_roman(4)\n")
    emit = ItemEmitter(Collector())
    source = ScriptedCandidates(batches, cut_off=[RAN_ON, CUT_SHORT])
    router = ModeRouter(ScriptedPool(sources={"fast": source}), "fast", emit)
    settings = HealSettings(n=5, ladder=True, parallel=False, test_timeout_s=20)
    healer = Healer(Workspace(root), test_cmd, settings, emit=emit)
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": TASK}]
    return asyncio.run(healer.heal(router, messages, TASK)), source


def test_a_check_alone_is_told_from_tests_with_a_check():
    assert only_check(CHECK)
    assert not only_check(with_check("python -m pytest -q", "python roman.py"))
    assert not only_check("python -m pytest -q")


def test_a_cut_off_program_that_runs_does_not_end_the_ladder_and_a_whole_one_wins(tmp_path):
    outcome, source = heal(tmp_path, [[RAN_ON], [WHOLE, WHOLE]])
    cut, *rest = outcome.results
    assert cut.status == "failed" and "repeating itself" in cut.error and cut.exit_code == 0
    assert outcome.best is not None and outcome.best.finish_reason == "stop"
    assert "(4, 'IV')" in outcome.best.diff
    assert [d.n for d in source.draws] == [1, 3]  # the greedy reply, then the sampled rung


def test_a_cut_off_program_alone_is_still_the_closest_failure(tmp_path):
    outcome, _ = heal(tmp_path, [[RAN_ON], [RAN_ON]])
    assert outcome.best is None
    assert outcome.results[0].status == "failed" and outcome.results[0].exit_code == 0


def test_tests_that_pass_a_cut_off_reply_still_decide(tmp_path):
    tests = f"{sys.executable} -m pytest -q -p no:cacheprovider test_roman.py"
    outcome, source = heal(tmp_path, [[RAN_ON]], test_cmd=with_check(tests, "python -c 'import roman'"))
    assert outcome.best is not None and outcome.best.finish_reason == "length"
    assert len(source.draws) == 1


def test_a_long_program_merely_cut_short_still_passes_its_check(tmp_path):
    # Sampling more of a program too long for the limit would cost minutes and be cut short too.
    outcome, source = heal(tmp_path, [[CUT_SHORT], [WHOLE]])
    assert outcome.best is not None and outcome.best.finish_reason == "length"
    assert len(source.draws) == 1
