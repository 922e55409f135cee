"""The code of the tests that fail, for a repair to read beside what they said.

A failing run's summary (`test_feedback.failure_summary`) shows the assertion that broke, with its
values; but a test that checks several cases stops at the first that fails, and a rewrite that
fixes that one case breaks the next. With the whole failing test in view (the function each of
the failing output's frames in the workspace's test files is in, the line that failed marked), a
repair sees every case the code must meet, as a developer reads the test before fixing the code.
Only test files are shown (`TestFiles`): frames in the code under repair are the rewrite's own
business, and a secret file is never read.
"""

from __future__ import annotations

from whiz.agent.errors import WhizAgentError
from whiz.agent.project.test_files import TestFiles
from whiz.agent.project.workspace import Workspace
from whiz.modes.localize import frames, functions_in

MAX_TESTS = 2
"""Test functions shown: the one where the run broke, and the one that called it."""
MAX_TEST_LINES = 40
"""Lines shown of one test; a longer one is shown around the line that failed."""
MAX_CHARS = 2500
"""All the test code shown, in characters (about 700 tokens, prefilled once per round)."""
AROUND = 10
"""Lines shown before a failing line that is in no function (a script's own asserts)."""
MARK = "  # <- fails here"


def failing_tests(ws: Workspace, failure: str, tests: TestFiles, max_chars: int = MAX_CHARS) -> str:
    """The failing tests' code (see the module's doc) as fenced blocks, deepest frame first; empty
    where no frame of `failure` is in a test file the workspace can read."""
    blocks: list[str] = []
    seen: set[tuple[str, int]] = set()
    used = 0
    for path, line in frames(failure, str(ws.root)):
        if len(blocks) >= MAX_TESTS or path not in tests:
            continue
        text = _readable(ws, path)
        if text is None:
            continue
        lines = text.splitlines()
        if not 1 <= line <= len(lines):
            continue
        inside = [f for f in functions_in(path, text) if f.start <= line <= f.end]
        if inside:
            fn = max(inside, key=lambda f: f.start)
            start, end = fn.start, fn.end
            what = f"`{fn.qualname}` in {path}"
        else:
            start, end = max(1, line - AROUND), min(len(lines), line + 2)
            what = f"{path}, lines {start}-{end}"
        if (path, start) in seen:
            continue
        seen.add((path, start))
        if end - start + 1 > MAX_TEST_LINES:  # a long test: the part around the failing line
            start = max(start, line - MAX_TEST_LINES + 5)
            end = min(end, start + MAX_TEST_LINES - 1)
        shown = [x + MARK if n == line else x for n, x in enumerate(lines[start - 1 : end], start)]
        block = f"{what}:\n```python\n" + "\n".join(shown) + "\n```"
        if used + len(block) > max_chars:
            break
        blocks.append(block)
        used += len(block)
    return "\n\n".join(blocks)


def _readable(ws: Workspace, path: str) -> str | None:
    try:
        if ws.is_secret(path):
            return None
        return ws.read_text(path)
    except (WhizAgentError, OSError):
        return None
