"""No test asserts how long something took by the wall clock: such a test flakes on a loaded
machine and passes on a broken fast one. Count the work, compare n with k·n in CPU time
(`tests/cost.py`), or check the deadline the code enforces (what it says or does past it). A wall
clock may still bound a wait, so that a hung test fails (`deadline = time.monotonic() + 10`)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent

CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}
"""`time.<name>()` calls that read the wall clock (`thread_time` and `process_time` count CPU)."""

ALLOWED = {
    ("engine/test_scheduler.py", "test_ttft_and_decode_timings_are_reported"): (
        "the engine's own timings must fit within the span they were measured in: a consistency "
        "check, which load cannot break"
    ),
}
"""(file, test function): why its assertion on an elapsed time stays."""


def _is_clock(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CLOCKS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "time"
    )


def _elapsed(node: ast.AST, names: set[str]) -> bool:
    """Whether `node` holds a difference of clock readings, or a name assigned one."""
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.BinOp)
            and isinstance(sub.op, ast.Sub)
            and any(map(_is_clock, (sub.left, sub.right)))
        ):
            return True
        if isinstance(sub, ast.Name) and sub.id in names:
            return True
    return False


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]


def _elapsed_names(func: ast.AST, timing: set[str]) -> set[str]:
    """Names `func` assigns an elapsed time, or the result of a function in `timing` (one that
    returns an elapsed time)."""
    names: set[str] = set()
    for node in ast.walk(func):
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        called = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in timing
        if called or _elapsed(value, names):
            for target in node.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def _timed_asserts(tree: ast.AST) -> list[tuple[str, int]]:
    """(enclosing function, line) of each assert that compares an elapsed wall-clock time."""
    timing: set[str] = set()
    for func in _functions(tree):  # helpers that return an elapsed time (`exit_s, answer = ...`)
        names = _elapsed_names(func, set())
        returns = [n.value for n in ast.walk(func) if isinstance(n, ast.Return) and n.value is not None]
        if any(_elapsed(value, names) for value in returns):
            timing.add(func.name)
    found = []
    for func in _functions(tree):
        elapsed = _elapsed_names(func, timing)
        for node in ast.walk(func):
            if not isinstance(node, ast.Assert):
                continue
            for compare in ast.walk(node.test):
                ordered = isinstance(compare, ast.Compare) and any(
                    isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in compare.ops
                )
                if ordered and _elapsed(compare, elapsed):
                    found.append((func.name, node.lineno))
                    break
    return found


def test_no_test_asserts_an_elapsed_wall_clock_time():
    offending = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        for name, line in _timed_asserts(ast.parse(path.read_text(), str(path))):
            if (rel, name) not in ALLOWED:
                offending.append(f"tests/{rel}:{line} ({name})")
    assert not offending, (
        "asserts on a wall-clock time (count work instead; see this file's docstring):\n"
        + ("\n".join(offending))
    )


def test_the_check_finds_the_forms_it_forbids():
    caught = """
def test_direct():
    t0 = time.perf_counter()
    assert time.perf_counter() - t0 < 1.0

def test_through_a_name():
    started = time.monotonic()
    work()
    took = time.monotonic() - started
    assert took > 6

def test_scaled():
    start = time.perf_counter()
    wall_ms = (time.perf_counter() - start) * 1000
    assert ok and wall_ms < 20

def signal_it():
    t0 = time.monotonic()
    stop()
    return time.monotonic() - t0, answer()

def test_through_a_helper():
    exit_s, answer = signal_it()
    assert answer.ok and exit_s < 5
"""
    kept = """
def test_a_hang_guard():
    deadline = time.monotonic() + 5
    while not done() and time.monotonic() < deadline:
        pass
    assert time.monotonic() < deadline

def test_cpu_time():
    start = time.thread_time()
    assert time.thread_time() - start < 1
"""
    assert [name for name, _ in _timed_asserts(ast.parse(caught))] == [
        "test_direct",
        "test_through_a_name",
        "test_scaled",
        "test_through_a_helper",
    ]
    assert _timed_asserts(ast.parse(kept)) == []


def test_every_allowed_test_still_exists():
    for rel, name in ALLOWED:
        tree = ast.parse((TESTS / rel).read_text())
        assert any(
            isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name == name for f in ast.walk(tree)
        ), f"{rel}::{name} is allowed a timed assert but is gone: drop it from ALLOWED"
