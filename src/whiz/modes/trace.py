"""What a failing call does, line by line: the localized function run on the arguments a failing
check gave it, with the values each of its lines set (an execution trace).

Told only "expected X, got Y", a small model mostly changes the line it already suspected, the
same way again and again. Shown the values each line produced, the first line whose value is not
what the task means is there to read, and the rewrite starts from it. The call is taken from what
the checks said (`failing_call`): a top-level function called with literal arguments only, so that
running it again runs nothing the checks did not. It runs in the heal's sandboxed copy of the
workspace, by `trace_run.py`, with the interpreter the tests use (`interpreter`), under a time
limit and a bound on the lines traced (`trace_run.LIMIT`), so a call that never ends still says
where it went round.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from whiz.environments import SandboxOptions, environment_for
from whiz.modes.localize import Function
from whiz.modes.trace_run import MARK, command

TRACE_TIMEOUT_S = 10.0
SHOWN_STEPS = 20
"""Lines of a trace shown at most: the first ones and the last few, where a long loop went. Each
line shown is some 25 tokens of every rewrite's prompt."""
LAST_STEPS = 5
MAX_LINE_CHARS = 70


def failing_call(failure: str, function: Function) -> str | None:
    """The first call of `function` in what the checks said (an assertion, a doctest's example)
    whose arguments are all literals, as source; None where there is none, or the function is a
    method or a class (calling one needs an instance the output does not give)."""
    if function.kind != "function" or function.indent:
        return None
    for match in re.finditer(rf"(?<![\w.]){re.escape(function.name)}\(", failure):
        rest = failure[match.start() :].split("\n", 1)[0]
        for close in (i for i, ch in enumerate(rest) if ch == ")"):
            try:
                node = ast.parse(rest[: close + 1], mode="eval").body
            except SyntaxError:
                continue
            if _literal_call(node, function.name):
                return ast.unparse(node)
            break
    return None


def _literal_call(node: ast.expr, name: str) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name):
        return False
    values = [*node.args, *(k.value for k in node.keywords)]
    if any(isinstance(v, ast.Starred) for v in node.args) or any(k.arg is None for k in node.keywords):
        return False
    try:
        for value in values:
            ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def interpreter(test_cmd: str) -> str:
    """The Python the tests run with, where the command names one (`.venv/bin/python -m pytest`),
    so the function's imports resolve as they do for the tests; else `python3`."""
    try:
        words = shlex.split(test_cmd)
    except ValueError:
        words = []
    if words and re.fullmatch(r"python[\d.]*", PurePosixPath(words[0]).name):
        return words[0]
    return "python3"


async def traced(
    copy: Path, sandbox: SandboxOptions, function: Function, call: str, test_cmd: str
) -> Trace | None:
    """`call` run once in `copy` (a throwaway copy of the workspace: the call may write), by the
    tracer (`trace_run.py`), sandboxed as the tests are; None where it printed no trace."""
    spec = {"path": function.path, "name": function.name, "call": call,
            "head": SHOWN_STEPS - LAST_STEPS, "tail": LAST_STEPS}  # fmt: skip
    env = environment_for(copy, sandbox, timeout_s=TRACE_TIMEOUT_S)
    done = await env.run(command(spec, interpreter(test_cmd)))
    return read_trace(call, done.output)


Step = tuple[int, dict[str, str]]
"""A line run (its number in the file) and the locals it changed, as reprs."""


@dataclass(frozen=True)
class Trace:
    """One traced call: its first lines run and its last few, with the values each set; how many
    it ran; how the call ended."""

    call: str
    head: list[Step]
    tail: list[Step]
    steps: int
    ended: str
    """"returns 'x'", "raises ValueError: ...", or that it was stopped."""
    ran: frozenset[int] = frozenset()
    """Every line the call ran (numbers in the file): a one-line change elsewhere cannot change
    what it does (`mutants`' first lines)."""


def read_trace(call: str, output: str) -> Trace | None:
    """The trace the tracer printed, from the run's output; None where it printed none (the
    module did not import, the run was stopped by the time limit)."""
    _, mark, after = output.rpartition(MARK)
    if not mark:
        return None
    try:
        out = json.loads(after.strip().splitlines()[0])
        head, tail = ([_step(s) for s in out[part]] for part in ("head", "tail"))
        steps = int(out["steps"])
        ran = frozenset(int(line) for line in out.get("ran", []))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    if "returned" in out:
        ended = f"returns {out['returned']}"
    elif "raised" in out:
        ended = f"raises {out['raised']}"
    else:
        ended = f"was stopped after {out.get('stopped', '?')} lines: it does not end"
    return Trace(call, head, tail, steps, ended, ran)


def _step(raw: list) -> Step:
    line, changed = raw
    return int(line), {str(k): str(v) for k, v in changed.items()}


def shown_trace(trace: Trace, function: Function) -> str:
    """The trace as the repair is told it: each line run, as written, with what it set; where the
    call ran more lines than are shown, its first ones and its last few."""
    source = function.source.splitlines()

    def row(step: Step) -> str:
        line, changed = step
        at = line - function.start
        code = source[at].strip() if 0 <= at < len(source) else ""
        if len(code) > MAX_LINE_CHARS:
            code = code[: MAX_LINE_CHARS - 3] + "..."
        values = "  ".join(f"{k}={v}" for k, v in changed.items())
        return f"{line:>4} | {code}" + (f"   -> {values}" if values else "")

    rows = [row(step) for step in trace.head]
    skipped = trace.steps - len(trace.head) - len(trace.tail)
    if skipped > 0:
        rows.append(f"     ... {skipped} more lines ...")
    rows += [row(step) for step in trace.tail]
    body = "\n".join(rows + [f"The call {trace.ended}"])
    return f"What `{trace.call}` does now, line by line (the values each line set):\n```\n{body}\n```"
