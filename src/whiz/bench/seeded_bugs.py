"""Small repositories with one seeded bug and a test file beside it, for `whiz bench heal --suite
seeded` and the real-model heal tests: the task names the function, not the file, as a user
would, and the tests run with pytest as a user would run them (its plugins' warnings included).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BugCase:
    """A workspace to write, a task in words, and the test command that decides."""

    task_id: str
    task: str
    files: dict[str, str]
    test_cmd: str

    def write(self, root: Path) -> None:
        for path, text in self.files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)


PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"

STATS = '''def mean(xs):
    """The average of the numbers in xs."""
    return sum(xs) / (len(xs) + 1)


def spread(xs):
    """The difference between the largest and the smallest number in xs."""
    return max(xs) - min(xs)
'''
STATS_TEST = """from stats import mean, spread


def test_mean():
    assert mean([1, 2, 3]) == 2
    assert mean([4]) == 4
    assert mean([2, 4, 6, 8]) == 5


def test_spread():
    assert spread([3, 1, 2]) == 2
"""
MEAN = BugCase(
    "mean",
    "Fix the bug in mean so the tests pass.",
    {"stats.py": STATS, "test_stats.py": STATS_TEST},
    PYTEST,
)

SEEDED = (MEAN,)
