"""`--check CMD`, "it runs": for a task that makes a program, run it briefly and see it not crash.

A game or a server never exits by itself, so "exit code 0" cannot be the test. The check runs
the command for a few seconds: it passes when the command exits 0, or is still running when the
time is up and has printed no Python traceback. It is a test command like any other (it runs in
the sandbox, heals and escalates exactly as `--test-cmd` does) because `check_command` turns it
into one: this file run as a program, `python .../runs_check.py -- CMD`.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys

CHECK_TIMEOUT_S = 5.0
"""How long a program runs before "still running, no traceback" counts as working."""
TRACEBACK = "Traceback (most recent call last)"


def check_command(command: str, timeout_s: float = CHECK_TIMEOUT_S) -> str:
    """The shell command that runs `command` as a check (exit 0: it runs)."""
    # This file by its path, not `-m`: it needs only the standard library, so it runs in the
    # sandbox whatever the workspace's Python path is.
    python, script = shlex.quote(sys.executable), shlex.quote(os.path.abspath(__file__))
    return f"{python} {script} --timeout {timeout_s:g} -- {shlex.quote(command)}"


def with_check(test_cmd: str | None, check: str | None, timeout_s: float = CHECK_TIMEOUT_S) -> str | None:
    """The one command that decides: the tests, then the check; either alone; None for neither."""
    parts = [c for c in (test_cmd, check_command(check, timeout_s) if check else None) if c and c.strip()]
    return " && ".join(parts) if parts else None


def _prefix() -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(os.path.abspath(__file__))} --timeout "


def only_check(command: str) -> bool:
    """Whether `command` is a check alone (`with_check` with no tests): "it runs" is all that
    judges what it runs."""
    head, found, _ = command.partition(_prefix())
    return bool(found) and not head.strip()


def shown(command: str) -> str:
    """`command` as the model reads it: a check (`check_command`) as the program it runs. The
    wrapper names this machine's Python and whiz's own path, which tell the model nothing and
    would make its prompt, and so its seeded output, differ from one machine to the next."""
    # Here, not at the top: this file also runs as a program by its path, without whiz importable.
    from whiz.agent import found_checks_run

    if (found_checks := found_checks_run.shown(command)) is not None:
        return found_checks
    head, found, rest = command.partition(_prefix())
    if not found:
        return command
    try:
        parts = shlex.split(rest)  # the check is the last command (`with_check`): TIMEOUT -- CMD
    except ValueError:
        return command
    return head + parts[2] if len(parts) == 3 and parts[1] == "--" else command


def runs(exit_code: int | None, timed_out: bool, output: str) -> bool:
    """The check's verdict: exited 0, or still running at the timeout without a traceback."""
    if TRACEBACK in output:
        return False
    return exit_code == 0 or timed_out


def main(argv: list[str] | None = None) -> int:
    import argparse  # only when run as the check: `whiz exec` imports this module for `with_check`

    parser = argparse.ArgumentParser(prog="runs_check.py", description=__doc__)
    parser.add_argument("--timeout", type=float, default=CHECK_TIMEOUT_S)
    parser.add_argument("command")
    args = parser.parse_args(argv)
    # Its own process group, so the program and whatever it started stop together at the timeout.
    proc = subprocess.Popen(
        ["/bin/sh", "-c", args.command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    output = out.decode("utf-8", errors="replace")
    sys.stdout.write(output)
    ok = runs(proc.returncode, timed_out, output)
    state = f"still running after {args.timeout:g} s" if timed_out else f"exit code {proc.returncode}"
    verdict = "it runs" if ok else "it does not run"
    if TRACEBACK in output:
        verdict += " (it printed a traceback)"
    sys.stdout.write(f"\n[check] `{args.command}` {state}: {verdict}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
