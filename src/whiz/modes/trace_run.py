"""Traces one call of a function (`trace.py`): run as a program by its path, in a throwaway copy of
the workspace, with the spec its command carries (`command`), as `found_checks_run.py` runs the
checks. It needs only the standard library, so it runs in the sandbox under whichever Python the
tests use.

It imports the function's module (by its dotted name, so that its package's relative imports
work), calls it once under `sys.settrace`, and prints `MARK`, then one JSON line: the first lines
run and the last few, each with the locals that line changed, how many ran, every line run, and
what the call returned or raised.
"""

from __future__ import annotations

import base64
import collections
import importlib
import importlib.util
import inspect
import json
import os
import shlex
import sys
from typing import Any

LIMIT = 5000
"""Lines run before the call is stopped: a loop that never ends still says where it went round."""
SHORT = 60
"""A value's repr is cut to this many characters."""
MARK = "@@whiz-trace@@"
"""Put before the trace's JSON on stdout: what the function itself prints comes before it."""


def command(spec: dict[str, Any], python: str) -> str:
    """The shell command that traces the call `spec` names in its folder."""
    blob = base64.urlsafe_b64encode(json.dumps(spec, sort_keys=True).encode()).decode()
    return f"{shlex.quote(python)} {shlex.quote(os.path.abspath(__file__))} {blob}"


class Stopped(Exception):
    pass


def cut(text: str) -> str:
    return text if len(text) <= SHORT else text[: SHORT - 3] + "..."


def short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}>"
    return cut(text)


def load(path: str):
    # Run by its path, this file's folder leads `sys.path`: its neighbours (`trace.py`, `pool.py`)
    # must not stand for the user's modules or the standard library's.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path[:0] = [os.getcwd(), os.path.dirname(os.path.abspath(path))]
    dotted = path[:-3].replace("/", ".") if path.endswith(".py") else ""
    if dotted.endswith(".__init__"):
        dotted = dotted[: -len(".__init__")]
    try:
        return importlib.import_module(dotted)
    except Exception:
        spec = importlib.util.spec_from_file_location("_whiz_traced", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """The trace of `spec`'s call, as it is printed."""
    module = load(spec["path"])
    code = inspect.unwrap(getattr(module, spec["name"])).__code__
    # The first lines run and the last few are kept (what is shown), so the output stays small
    # however long the call runs.
    head: list = []
    tail: collections.deque = collections.deque(maxlen=spec["tail"])
    state: dict[str, Any] = {"frame": None, "line": None, "seen": {}, "count": 0, "steps": 0}
    ran: set[int] = set()

    def keep(step: list) -> None:
        state["steps"] += 1
        (head if len(head) < spec["head"] else tail).append(step)

    def local(frame, event, arg):
        if frame is not state["frame"]:
            return None
        now = {k: short(v) for k, v in frame.f_locals.items()}
        changed = {k: v for k, v in now.items() if state["seen"].get(k) != v}
        state["seen"] = now
        if state["line"] is not None and event in ("line", "return", "exception"):
            keep([state["line"], changed])
            state["line"] = None  # a raise's line is told once, not again as the frame returns
        if event == "line":
            state["line"] = frame.f_lineno
            ran.add(frame.f_lineno)
            state["count"] += 1
            if state["count"] > LIMIT:
                raise Stopped()
        return local

    def calls(frame, event, arg):
        if event == "call" and frame.f_code is code and state["frame"] is None:
            state["frame"] = frame
            state["seen"] = {k: short(v) for k, v in frame.f_locals.items()}
            return local
        return None

    out: dict[str, Any] = {}
    sys.settrace(calls)
    try:
        value = eval(spec["call"], vars(module))  # literal arguments only (`trace.failing_call`)
        out["returned"] = short(value)
    except Stopped:
        out["stopped"] = LIMIT
    except BaseException as exc:
        try:
            said = str(exc)
        except Exception:
            said = "<str failed>"
        out["raised"] = f"{type(exc).__name__}: {cut(said)}"
    finally:
        sys.settrace(None)
    out.update(head=head, tail=list(tail), steps=state["steps"], ran=sorted(ran))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: trace_run.py SPEC\n")
        return 2
    try:
        spec = json.loads(base64.urlsafe_b64decode(args[0].encode()))
    except ValueError:
        sys.stderr.write("trace_run.py: the spec does not decode\n")
        return 2
    out = run(spec)
    print(MARK)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
