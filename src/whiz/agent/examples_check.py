"""The task's own examples, checked against a new program: `assert f(x) == y` lines, one by one.

A task that writes a program often shows what its function must give ("(200, 'hello') for
'/'"). A check that only runs the program cannot see a program that answers its one example by
name and crashes on the next, or gets the example itself wrong. `whiz.modes.examples` has the
model write the task's examples as assert lines; this file, run as a program in the candidate's
copy (`examples_command`), imports the new module and tries each line on its own, so one
failing example does not hide the others, and says for each what the call gave instead.

Standard library only, run by its path, as `runs_check.py` is: it runs in the sandbox whatever
the workspace's Python path is.
"""

from __future__ import annotations

import os
import shlex
import sys

CALL_TIMEOUT_S = 2.0
"""How long one example's call may run: a loop that never ends is a failed example, not a hang."""
SUMMARY = "[examples]"


def examples_command(module: str, lines: list[str]) -> str:
    """The shell command that checks `lines` (assert statements) against `module`."""
    python, script = shlex.quote(sys.executable), shlex.quote(os.path.abspath(__file__))
    return f"{python} {script} --module {shlex.quote(module)} -- {shlex.quote(chr(10).join(lines))}"


def main(argv: list[str] | None = None) -> int:
    import argparse
    import ast
    import contextlib
    import importlib
    import io
    import signal

    parser = argparse.ArgumentParser(prog="examples_check.py", description=__doc__)
    parser.add_argument("--module", required=True)
    parser.add_argument("lines")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.getcwd())

    def said(exc: BaseException) -> str:
        return shorter(f"{type(exc).__name__}: {exc}".strip().rstrip(":"))

    def shorter(text: str, limit: int = 200) -> str:
        return text if len(text) <= limit else text[:limit] + "..."

    def expired(_signum, _frame):
        raise TimeoutError(f"no answer within {CALL_TIMEOUT_S:g} s")

    signal.signal(signal.SIGALRM, expired)
    quiet = io.StringIO()  # what the program prints is not what the examples are about
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            signal.setitimer(signal.ITIMER_REAL, CALL_TIMEOUT_S)
            module = importlib.import_module(args.module)
    except BaseException as exc:  # noqa: BLE001 - any failure to import is the verdict
        print(f"{SUMMARY} `import {args.module}` failed: {said(exc)}")
        return 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    names = {**vars(module), args.module: module}
    lines = [line for line in args.lines.splitlines() if line.strip()]
    held = 0
    for line in lines:
        test = ast.parse(line).body[0].test
        whole = line.strip().removeprefix("assert").strip()
        try:
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                signal.setitimer(signal.ITIMER_REAL, CALL_TIMEOUT_S)
                if isinstance(test, ast.Compare) and len(test.comparators) == 1:
                    got = eval(compile(ast.Expression(test.left), "<example>", "eval"), names)  # noqa: S307
                    want = eval(compile(ast.Expression(test.comparators[0]), "<example>", "eval"), names)  # noqa: S307
                    ok = got is want if isinstance(test.ops[0], ast.Is) else got == want
                    wrong = f"it gave {shorter(repr(got))}"
                else:
                    ok, wrong = bool(eval(compile(ast.Expression(test), "<example>", "eval"), names)), "false"  # noqa: S307
        except BaseException as exc:  # noqa: BLE001 - an example that raises has failed
            ok, wrong = False, f"it raised {said(exc)}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        held += ok
        print(f"held: {whole}" if ok else f"FAILED: {whole}: {wrong}")
    print(f"{SUMMARY} {held} of {len(lines)} of the task's own examples held")
    return 0 if held == len(lines) else 1


if __name__ == "__main__":
    raise SystemExit(main())
