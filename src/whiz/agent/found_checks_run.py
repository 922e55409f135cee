"""Runs the checks found in the user's code (`project/found_checks.py`) on the code as it is now.

Where no test command is given, the checks the user already wrote (a docstring's examples, its
doctests, the asserts of an `if __name__ == "__main__":` block, the repository's tests of the
function) judge an edit. They are frozen when they are found: a rewrite of the function that
also rewrote its docstring's examples must still answer the examples as the user wrote them.
So the command carries them (`command`), and this file, run as a program by its path, runs them
in the current folder (a candidate's copy of the workspace, or the workspace itself): it needs
only the standard library, so it runs in the sandbox whatever the workspace's Python path is.

It prints one line per check (`PASS`, `FAIL` with what came back, or with the syntax error of
code that does not parse, `ERROR` where the check could not run at all: the module's own import
failing, say), a count line in pytest's words, then one JSON line with every check's verdict
(`RESULTS`), and exits 0 when every check passed.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import zlib
from typing import Any

CHECK_TIMEOUT_S = 10
"""How long one in-process check (an example, a docstring's doctests, a main block) may run: a
rewrite that loops forever fails its check instead of holding the run to its timeout."""
TESTS_TIMEOUT_S = 60.0
"""How long the run of the repository's tests of the function may take."""
RESULTS = "[found-checks] "
"""The last line's prefix: the verdicts as JSON, `{where: "pass" | "fail" | "error"}`."""
OUTPUT_CHARS = 3000
"""How much of a failing test run's output is shown."""


def command(spec: dict[str, Any], python: str | None = None) -> str:
    """The shell command that runs the checks of `spec` (`FoundChecks.spec`) in its folder."""
    blob = base64.urlsafe_b64encode(zlib.compress(json.dumps(spec, sort_keys=True).encode(), 9)).decode()
    return f"{shlex.quote(python or sys.executable)} {shlex.quote(os.path.abspath(__file__))} {blob}"


def spec_of(command_line: str) -> dict[str, Any] | None:
    """The spec a `command` carries; None for any other command."""
    try:
        parts = shlex.split(command_line)
    except ValueError:
        return None
    if len(parts) != 3 or os.path.basename(parts[1]) != os.path.basename(__file__):
        return None
    try:
        return json.loads(zlib.decompress(base64.urlsafe_b64decode(parts[2].encode())))
    except (ValueError, zlib.error):
        return None


def shown(command_line: str) -> str | None:
    """The command as the model and the user read it (None: not a found-checks command): what it
    checks, not this machine's Python, whiz's path and an opaque blob."""
    spec = spec_of(command_line)
    if spec is None:
        return None
    return f"the checks already in the code ({spec.get('label') or 'none'})"


def verdicts(output: str) -> dict[str, str] | None:
    """The verdicts a run printed last, by check; None when the run never got there (killed)."""
    for line in reversed(output.splitlines()):
        if line.startswith(RESULTS):
            try:
                found = json.loads(line[len(RESULTS) :])
            except ValueError:
                return None
            return found if isinstance(found, dict) else None
    return None


# -- running, in the checked folder ------------------------------------------------------------------


class _TooLong(KeyboardInterrupt):
    """A check past its time. A KeyboardInterrupt, since doctest catches every other exception
    of an example as its outcome and would go on to the next example, which may loop too."""


@contextlib.contextmanager
def _limit(seconds: int):
    def ring(signum, frame):  # noqa: ARG001
        raise _TooLong(f"did not return within {seconds} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _load(path: str) -> dict[str, Any]:
    """The module at `path`, imported under its own name (a doctest may name it), as a namespace."""
    import importlib.util

    name = os.path.splitext(os.path.basename(path))[0]
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with _limit(CHECK_TIMEOUT_S), contextlib.redirect_stdout(io.StringIO()):
        spec.loader.exec_module(module)
    return vars(module)


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


Verdict = tuple[str, str, int, int]
"""A check's verdict (pass or fail), what came back where it failed, and the examples in it that
passed, of how many (a docstring's doctests are one check of several examples)."""


def _one(verdict: str, said: str) -> Verdict:
    return verdict, said, int(verdict == "pass"), 1


def _example(check: dict[str, Any], names: dict[str, Any]) -> Verdict:
    expr, want = check["expr"], check["want"]
    try:
        with _limit(CHECK_TIMEOUT_S), contextlib.redirect_stdout(io.StringIO()):
            expected = eval(want, dict(names))  # noqa: S307 - the user's own example
            got = eval(expr, dict(names))  # noqa: S307
    except _TooLong as exc:
        return _one("fail", f"{expr}: {exc}")
    except Exception as exc:  # the function raised: it does not answer the example
        return _one("fail", f"{expr} raised {type(exc).__name__}: {exc}")
    try:
        same = bool(got == expected)
    except Exception:
        same = False
    return _one("pass", "") if same else _one("fail", f"{expr} returned {_brief(got)}, expected {want}")


def _doctest(check: dict[str, Any], names: dict[str, Any]) -> Verdict:
    import doctest

    parser, out = doctest.DocTestParser(), io.StringIO()
    test = parser.get_doctest(check["doc"], dict(names), check["name"], check["file"], check["line"])
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    try:
        with _limit(CHECK_TIMEOUT_S):
            result = runner.run(test, out=out.write, clear_globs=True)
    except _TooLong as exc:
        return "fail", f"the docstring's examples: {exc}", 0, max(1, len(test.examples))
    passed = result.attempted - result.failed
    if result.failed:
        return "fail", out.getvalue().strip(), passed, result.attempted
    return "pass", "", passed, result.attempted


def _main_block(check: dict[str, Any], names: dict[str, Any]) -> Verdict:
    scope = dict(names)
    scope["__name__"] = "__main__"
    try:
        with _limit(CHECK_TIMEOUT_S), contextlib.redirect_stdout(io.StringIO()):
            # Padded to its place in the file, so a failing assert names the file's own line.
            source = "\n" * (check["line"] - 1) + check["source"]
            exec(compile(source, check["file"], "exec"), scope)  # noqa: S102
    except AssertionError as exc:
        import traceback

        line = traceback.extract_tb(exc.__traceback__)[-1].lineno
        said = f": {exc}" if str(exc) else ""
        return _one("fail", f"the assert at {check['file']}:{line} failed{said}")
    except (_TooLong, Exception) as exc:
        return _one("fail", f"the block raised {type(exc).__name__}: {exc}")
    return _one("pass", "")


def _tests(ids: list[str], python: str) -> tuple[dict[str, str], str]:
    """The repository's tests of the function, in one pytest run: each id's verdict, and the
    output where any failed."""
    argv = [python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--no-header", *ids]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=TESTS_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return {i: "fail" for i in ids}, f"the tests ran past {TESTS_TIMEOUT_S:g} s"
    except OSError as exc:
        return {i: "error" for i in ids}, f"pytest could not start: {exc}"
    output = (done.stdout + done.stderr).strip()
    if done.returncode == 0:
        return {i: "pass" for i in ids}, ""
    if done.returncode not in (1,):  # not collected, an internal or usage error: nothing ran
        return {i: "error" for i in ids}, output[-OUTPUT_CHARS:]
    found: dict[str, str] = {}
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        node = rest.split(" - ")[0].strip()
        if word in ("PASSED", "FAILED", "ERROR") and node in ids:
            found[node] = {"PASSED": "pass", "FAILED": "fail"}.get(word, "error")
    return {i: found.get(i, "fail") for i in ids}, output[-OUTPUT_CHARS:]


RUNNERS = {"example": _example, "doctest": _doctest, "main": _main_block}


def run(spec: dict[str, Any], write=print) -> dict[str, str]:
    """Run every check of `spec` here, saying each verdict; returns them by check."""
    sys.dont_write_bytecode = True  # leave no __pycache__ in the user's folder
    results: dict[str, str] = {}
    passed = total = 0
    modules: dict[str, dict[str, Any] | str] = {}
    for check in spec.get("checks", []):
        kind, where = check["kind"], check["where"]
        if kind == "test":
            continue
        path = check["file"]
        if path not in modules:
            try:
                modules[path] = _load(path)
            except SyntaxError as exc:  # the code itself is broken: its checks fail
                modules[path] = f"fail:{path} does not parse: {type(exc).__name__}: {exc}"
            except BaseException as exc:  # an import that fails here, say: nothing to check
                modules[path] = f"error:{path} did not import: {type(exc).__name__}: {exc}"
        names = modules[path]
        if isinstance(names, str):
            verdict, _, said = names.partition(":")
            results[where], ok, units = verdict, 0, 1
        else:
            results[where], said, ok, units = RUNNERS[kind](check, names)
        passed, total = passed + ok, total + units
        write(f"{results[where].upper()} {where} {check['text']}" + (f"\n    {said}" if said else ""))
    ids = [c["where"] for c in spec.get("checks", []) if c["kind"] == "test"]
    if ids:
        found, output = _tests(ids, spec.get("python") or sys.executable)
        for node in ids:
            results[node] = found[node]
            write(f"{found[node].upper()} {node}")
        if output:
            write(output)
        passed, total = passed + sum(v == "pass" for v in found.values()), total + len(ids)
    # In pytest's words, so that a heal ranks the closest failure by how many examples it passed.
    write(f"{passed} passed, {total - passed} failed in 0.00s")
    write(RESULTS + json.dumps(results, sort_keys=True))
    return results


def _off_path() -> None:
    """Run by its path, this file's folder leads `sys.path`: its neighbours (`config.py`,
    `tools.py`, `errors.py`) must not stand for modules of the same name that the user's code
    imports from its own folder or site-packages."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]


def main(argv: list[str] | None = None) -> int:
    _off_path()
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: found_checks_run.py SPEC\n")
        return 2
    try:
        spec = json.loads(zlib.decompress(base64.urlsafe_b64decode(args[0].encode())))
    except (ValueError, zlib.error):
        sys.stderr.write("found_checks_run.py: the spec does not decode\n")
        return 2
    results = run(spec)
    return 0 if results and all(v == "pass" for v in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
