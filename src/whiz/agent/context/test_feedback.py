"""What a failing test run said, in the fewest lines that still say it.

A test runner's output opens with what no fix needs (warnings, deprecations, the session's
header, progress dots) and a small model reads all of it as the problem: every heal candidate's
output began with a plugin's deprecation warning. `failure_summary` keeps, per failing test (two
at most), its name, the assertion with the values it compared, and the last frame of the
traceback, preferring one in the workspace over the standard library's; then the runner's count
line. It reads pytest's report, unittest's, and a bare Python traceback (after the last lines the
program printed); any other output keeps its tail, with the warnings taken out. What differs from
one run of the same code to the next (an object's address in its repr, the run's duration, the
workspace's folder before its files' paths) is taken out too, so the same failure reads the same
each time (`_steady`). `count_passed` reads how many tests passed, for ranking failures.
"""

from __future__ import annotations

import re

MAX_FAILURES = 2
"""Failing tests shown: the first says what is wrong; a second shows whether it is one bug."""
MAX_SUMMARY_CHARS = 1500

_PYTEST_SECTION = re.compile(r"^={3,} ?(.*?) ?={3,}$")
_PYTEST_TEST = re.compile(r"^_{3,} (.+?) _{3,}$")
_PYTEST_FRAME_BREAK = re.compile(r"^(_ ){5,}_?$")
_PYTEST_LOCATION = re.compile(r"^\S+:\d+: \w+")
_PYTEST_PLACE = re.compile(r"^\S+:\d+: in \S")
"""A place in a short traceback (`test_x.py:7: in check`), the line that ran under it; not a long
traceback's closing location (`test_x.py:9: AssertionError`, `x.py:3: Failed`)."""
_PYTEST_COUNTS = re.compile(r"^=*\s*(?:\d+ \w+(?:, )?)+ in [\d.]+s")
_UNITTEST_RULE = re.compile(r"^(=|-){40,}$")
_UNITTEST_HEAD = re.compile(r"^(FAIL|ERROR): ")
_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+')
_WARNING = re.compile(r"\b\w*Warning: ")
_PROGRESS = re.compile(r"^[.FEsxXp]+\s*(\[\s*\d+%\])?$")
_HEADER = re.compile(r"^(platform |rootdir: |configfile: |plugins: |cachedir: |collected \d+|asyncio: )")
_OUTSIDE = ("site-packages", "/lib/python", "<frozen", "<string>")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+(?=>)")
"""An object's address in its default repr (`<function allclose at 0x7f38e069c1b0>`)."""
_DURATION = re.compile(
    r"(\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?)|^Ran \d+ tests?) in [\d.]+s\b", re.M
)
"""How long a run took, in pytest's count line and unittest's."""


def failure_summary(output: str, root: str | None = None, max_chars: int = MAX_SUMMARY_CHARS) -> str:
    """The smallest useful part of a failing run's `output` (see the module's doc). `root`, the
    workspace's folder, tells its frames from the libraries'."""
    lines = output.splitlines()
    summary = _pytest(lines) or _unittest(lines, root) or _script(lines, root) or _tail(lines)
    return _cut(_steady(summary, root).strip("\n"), max_chars)


def _steady(summary: str, root: str | None) -> str:
    """The summary without what changes between runs of the same code: addresses in reprs, the
    run's duration, and the workspace's folder before its files' paths (they are named by their
    paths in it, as the model knows them). A candidate's feedback is part of the next request,
    and a prompt that differed by a duration made a seeded heal draw different candidates."""
    summary = _DURATION.sub(r"\1", _ADDRESS.sub("", summary))
    return summary.replace(root.rstrip("/") + "/", "") if root else summary


def told(outcome_text: str, root: str | None = None) -> str:
    """A failed command's outcome as the agent words it (`$ command`, its output, `Exit code N.`)
    with the output cut to its summary: what the model reads after its edit failed the tests,
    where all they printed (warnings first, often) buried what failed."""
    lines = outcome_text.split("\n")
    head = lines[0] if lines[0].startswith("$ ") else ""
    tail = lines[-1] if len(lines) > 1 and lines[-1].startswith(("Exit code ", "Timed out ")) else ""
    body = "\n".join(lines[1 if head else 0 : -1 if tail else None])
    return "\n".join(part for part in (head, failure_summary(body, root), tail) if part)


def headline(summary: str) -> str:
    """The one line of a summary that says what failed: the first error line (pytest's `E`), else
    the last line naming an error, else the last line."""
    lines = [x.strip() for x in summary.splitlines() if x.strip()]
    for line in lines:
        if line.startswith("E "):
            return line[1:].strip()
    errors = [x for x in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b", x)]
    return (errors or lines or [""])[-1]


def count_passed(output: str) -> int | None:
    """How many tests passed, from the runner's count line (pytest's or unittest's); None where
    the output has no count."""
    for line in reversed(output.splitlines()):
        if _PYTEST_COUNTS.match(line.strip()):
            found = re.search(r"(\d+) passed", line)
            return int(found.group(1)) if found else 0
    ran = re.search(r"^Ran (\d+) tests? in", output, re.M)
    if ran is None:
        return None
    failed = re.search(r"^FAILED \(([^)]*)\)", output, re.M)
    bad = 0
    if failed:
        bad = sum(int(n) for kind, n in re.findall(r"(\w+)=(\d+)", failed.group(1)) if kind != "skipped")
    return max(0, int(ran.group(1)) - bad)


def _pytest(lines: list[str]) -> str:
    """pytest's FAILURES/ERRORS sections, each test to its assertion and last frame."""
    blocks: list[tuple[str, list[str]]] = []
    inside = False
    counts = ""
    for line in lines:
        if _PYTEST_COUNTS.match(line.strip()):
            counts = line.strip("= ")
            continue
        section = _PYTEST_SECTION.match(line)
        if section:
            title = section.group(1)
            inside = title in ("FAILURES", "ERRORS") or title.startswith("ERROR")
            continue
        test = _PYTEST_TEST.match(line)
        if inside and test:
            blocks.append((test.group(1), []))
        elif inside and blocks:
            blocks[-1][1].append(line)
    if not blocks:
        return ""
    kept = [_pytest_test(name, body) for name, body in blocks[:MAX_FAILURES]]
    more = len(blocks) - len(kept)
    if more > 0:
        kept.append(f"({more} more failing)")
    if counts:
        kept.append(counts)
    return "\n\n".join(kept)


def _pytest_test(name: str, body: list[str]) -> str:
    """One failing test: its name, the line of the test that failed, and the last frame's failing
    line, error lines (`E ...`) and place."""
    frames: list[list[str]] = [[]]
    for line in body:
        if _PYTEST_FRAME_BREAK.match(line.strip()):
            frames.append([])
        else:
            frames[-1].append(line)
    frames = [f for f in frames if any(x.strip() for x in f)]
    if not frames:
        return name
    out = [f"{name}:"]
    last = frames[-1]
    if len(frames) > 1:  # the test's own line that led there, then the frame where it broke
        out += _frame_lines(frames[0], errors=False)
    out += _frame_lines(last, errors=True)
    return "\n".join(out)


def _frame_lines(frame: list[str], *, errors: bool) -> list[str]:
    """A frame's failing line (`>`), places and, with `errors`, its error lines. In the short
    traceback (`--tb=short`), which marks no line, the line under each place is the one that ran:
    without it a failure says `assert '00' == '0'` but not which call gave '00'."""
    kept = []
    after_place = False
    for line in frame:
        stripped = line.strip()
        if line.startswith(">") or _PYTEST_LOCATION.match(stripped) or (errors and line.startswith("E ")):
            kept.append(line.rstrip())
            after_place = bool(_PYTEST_PLACE.match(stripped))
        elif after_place and stripped:
            kept.append(line.rstrip())
            after_place = False
    return kept


def _unittest(lines: list[str], root: str | None) -> str:
    """unittest's FAIL/ERROR reports, each to its exception and last frame, and its count."""
    reports: list[list[str]] = []
    reading = False
    for line in lines:
        if _UNITTEST_HEAD.match(line):
            reports.append([line])
            reading = True
        elif _UNITTEST_RULE.match(line.strip()):
            if reports and len(reports[-1]) > 1:
                reading = False  # the rule that closes a report (one follows its header)
        elif reading and reports:
            reports[-1].append(line)
    if not reports:
        return ""
    kept = [r[0] + "\n" + _traceback(r[1:], root) for r in reports[:MAX_FAILURES]]
    if len(reports) > MAX_FAILURES:
        kept.append(f"({len(reports) - MAX_FAILURES} more failing)")
    ends = [x for x in lines if x.startswith(("Ran ", "FAILED (", "OK"))]
    return "\n\n".join(kept + ([" ".join(ends)] if ends else []))


PRINTED_LINES = 3
"""Lines a script printed just before its traceback that are kept: often what it got."""


def _script(lines: list[str], root: str | None) -> str:
    """A program's traceback (`_traceback`), after the last lines it printed before it."""
    found = _traceback(lines, root)
    if not found:
        return ""
    start = max(i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)"))
    printed = [x for x in _tail(lines[:start]).splitlines() if x.strip()][-PRINTED_LINES:]
    return "\n".join([*printed, found])


def _traceback(lines: list[str], root: str | None) -> str:
    """The last Python traceback: its last frame in the workspace (else its last frame), and the
    exception it ended with."""
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return ""
    block = lines[starts[-1] + 1 :]
    frames = [i for i, line in enumerate(block) if _FRAME.match(line)]
    if not frames:
        return ""
    end = len(block)
    after = frames[-1] + 1
    while after < end and block[after].startswith((" ", "\t")):
        after += 1
    exception = [x for x in block[after:] if x.strip()]
    exception = exception[: next((i for i, x in enumerate(exception) if _FRAME.match(x)), len(exception))]
    ours = [i for i in frames if _in_workspace(_FRAME.match(block[i]).group(1), root)]  # type: ignore[union-attr]
    at = (ours or frames)[-1]
    frame = [block[at]]
    for line in block[at + 1 :]:
        if _FRAME.match(line) or not line.startswith((" ", "\t")):
            break
        if line.strip() and set(line.strip()) <= set("^~ "):
            continue  # the carets under an expression
        frame.append(line)
    return "\n".join([*frame, *exception[:6]])


def _in_workspace(path: str, root: str | None) -> bool:
    if any(mark in path for mark in _OUTSIDE):
        return False
    if root and path.startswith("/"):
        return path.startswith(root.rstrip("/") + "/")
    return True


def _tail(lines: list[str]) -> str:
    """Output no runner's report was found in: its lines without warnings, headers or progress."""
    kept: list[str] = []
    skipping = 0
    for line in lines:
        stripped = line.strip()
        if _WARNING.search(line):
            skipping = 8  # the warning's message, up to the indented source line that raised it
            continue
        if skipping:
            skipping = 0 if line.startswith((" ", "\t")) and stripped else skipping - 1
            continue
        if _HEADER.match(stripped) or _PROGRESS.match(stripped) or _PYTEST_SECTION.match(stripped):
            continue
        kept.append(line)
    return "\n".join(kept)


def _cut(text: str, max_chars: int) -> str:
    """The end of `text` within `max_chars` (a failure says what it is last)."""
    if len(text) <= max_chars:
        return text
    return "[...]\n" + text[-max_chars:].split("\n", 1)[-1]
