"""Small buggy workspaces whose code already says what is right, for the found-checks tests: a
docstring's doctests, its example lines, a `__main__` block's asserts, a repository's own tests.
Each is a dict of path to text; `write` puts one in a folder."""

from __future__ import annotations

from pathlib import Path

DOCTESTS = {
    "solution.py": '''def clamp(x, lo, hi):
    """Clamp x into [lo, hi].

    >>> clamp(5, 0, 3)
    3
    >>> clamp(-1, 0, 3)
    0
    """
    if x > hi:
        return hi
    if x < lo:
        return hi
    return x
'''
}
CLAMP_FIXED = DOCTESTS["solution.py"].replace(
    "        return hi\n    return x", "        return lo\n    return x"
)

EXAMPLES = {
    "solution.py": '''def last_word_length(text):
    """The length of the last word of text.

    last_word_length("hello world") == 5
    last_word_length("fly me   ") -> 2
    last_word_length("") == 0
    """
    words = text.split(" ")
    return len(words[-1]) if words else 0


def helper():
    return 1
'''
}

MAIN_BLOCK = {
    "stats.py": """def mean(values):
    return sum(values) / (len(values) + 1)


if __name__ == "__main__":
    assert mean([2, 4]) == 3
    assert mean([5]) == 5
    print("ok")
"""
}

REPO_TESTS = {
    "shapes/area.py": "def rect_area(w, h):\n    return w + h\n\n\ndef unrelated():\n    return 0\n",
    "shapes/__init__.py": "",
    "tests/test_area.py": (
        "from shapes.area import rect_area, unrelated\n\n\n"
        "def test_square():\n    assert rect_area(2, 2) == 4\n\n\n"
        "def test_rect():\n    assert rect_area(2, 3) == 6\n\n\n"
        "def test_unrelated():\n    assert unrelated() == 0\n\n\n"
        "class TestArea:\n    def test_zero(self):\n        assert rect_area(0, 5) == 0\n"
    ),
}

NO_CHECKS = {"solution.py": "def double(x):\n    return x + x + 1\n"}


def write(root: Path, files: dict[str, str]) -> Path:
    """`files` written under `root`; returns `root`."""
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root
