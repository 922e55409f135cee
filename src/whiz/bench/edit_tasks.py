"""The tasks of `whiz bench edits`: file edits with a checkable answer, and how to check a reply.

Two suites. `rename` is built from code the project did not write: windows of 40-60 lines of
well-known pure-Python standard library modules, each with an instruction whose answer is
mechanical (rename a function, rename a parameter, add a decorator), so correctness is an exact
comparison. `editeval` is InstructCoder's EditEval (194 tasks), whose answers are checked by
running each task's test against the edited code. `freeform` is the other side: new text, with
nothing in the context to copy and a prediction of unrelated code, so drafts keep missing; it
shows what speculation costs where it cannot help.
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import random
import re
import sys
import sysconfig
import tempfile
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from whiz.environments import run_confined

# Fixed, so the suite is the same on every run of one Python version. Pure Python, well known.
RENAME_MODULES = (
    "base64", "bisect", "calendar", "colorsys", "copy", "dataclasses", "difflib", "fnmatch",
    "ftplib", "functools", "genericpath", "getopt", "gettext", "glob", "gzip", "heapq",
    "ipaddress", "linecache", "locale", "mimetypes", "platform", "posixpath", "pprint", "quopri",
    "shutil", "statistics", "tabnanny", "textwrap", "traceback", "uuid",
)  # fmt: skip
KINDS = ("rename-function", "rename-parameter", "add-decorator")
MIN_LINES, MAX_LINES = 40, 60
DECORATOR = "log_calls"
CHECK_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class EditTask:
    """One edit: the file before, the instruction, and what decides whether a reply is right.

    A rename task has `expected` (the exact file after the edit); an EditEval task has `test`
    (defining `check()`) and maybe `context`, a harness whose `{{Code}}` the code replaces.
    """

    suite: str
    task_id: str
    filename: str
    instruction: str
    code: str
    expected: str | None = None
    test: str | None = None
    context: str | None = None

    def is_correct(self, reply: str) -> bool:
        """Whether the model's reply (the whole edited file, fenced or not) does the edit.

        A free-form task has no answer to check: any reply counts.
        """
        if self.suite == "freeform":
            return bool(reply.strip())
        code = extract_code(reply)
        if self.expected is not None:
            return normalize(code) == normalize(self.expected)
        return run_check(self, code)


# -- checking replies ------------------------------------------------------------------------------

_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n(.*?)(?:^```[ \t]*$|\Z)", re.S | re.M)


def extract_code(reply: str) -> str:
    """The first fenced block's content (unterminated counts, for truncated replies), else all."""
    found = _FENCE.search(reply)
    return found.group(1) if found else reply


def normalize(code: str) -> str:
    """Trailing whitespace off every line, blank lines off both ends."""
    return "\n".join(line.rstrip() for line in code.strip("\n").splitlines()).strip("\n")


def program(task: EditTask, code: str) -> str:
    """The script that passes when it exits 0: the code (inside its context) then the test."""
    if in_context(task):
        code = task.context.replace("{{Code}}", code)
    return f"{code}\n{test_code(task)}"


def in_context(task: EditTask) -> bool:
    """Whether the task's code runs inside its context (the `{{Code}}` in it)."""
    return bool(task.context) and "{{Code}}" in task.context


def test_code(task: EditTask) -> str:
    """The task's test, calling its `check()`."""
    test = task.test or ""
    calls_check = re.search(r"^check\(", test, re.M)
    return f"{test}\n" + ("" if calls_check else "check()\n")


def run_check(task: EditTask, code: str, timeout_s: float = CHECK_TIMEOUT_S) -> bool:
    """Run the task's test against `code` in a fresh interpreter, in an otherwise empty directory,
    in the sandbox: the code is the model's. From a file, not `-c`: tests that read the program's
    source (`inspect.getsource`) need one."""
    with tempfile.TemporaryDirectory(prefix="whiz-edits-") as cwd:
        (Path(cwd) / "check_program.py").write_text(program(task, code))
        done = run_confined(Path(cwd), [sys.executable, "check_program.py"], timeout_s=timeout_s)
    return done is not None and done.returncode == 0


# -- the EditEval suite ----------------------------------------------------------------------------


def default_editeval_path() -> Path | None:
    """`shared/bench/editeval.jsonl` in the repository or beside it (`../shared`), if there is one."""
    for parent in Path(__file__).resolve().parents:
        if (candidate := parent / "shared/bench/editeval.jsonl").is_file():
            return candidate
    return None


def editeval_tasks(
    data: Path | str | None, limit: int | None, say: Callable[[str], None], bench: str
) -> list[EditTask] | None:
    """The first `limit` EditEval tasks from `data` (default: `default_editeval_path`), or None after
    telling the user, in `whiz bench <bench>`'s words, that there is no data."""
    path = data or default_editeval_path()
    if path is None or not Path(path).is_file():
        say(f"whiz bench {bench}: no EditEval data at {path or 'shared/bench/editeval.jsonl'}; pass --data")
        return None
    return load_editeval(path)[:limit]


def load_editeval(path: Path | str) -> list[EditTask]:
    """Read EditEval's JSONL: task_id, instruction, input, output (reference), test, context."""
    tasks = []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        number = row["task_id"].rsplit("/", 1)[-1]
        tasks.append(
            EditTask(
                suite="editeval",
                task_id=row["task_id"],
                filename=f"edit_{number}.py",
                instruction=row["instruction"].strip(),
                code=row["input"],
                test=row["test"],
                context=row.get("context") or None,
            )
        )
    return tasks


# -- the rename suite ------------------------------------------------------------------------------


def rename_tasks(modules: tuple[str, ...] = RENAME_MODULES, stdlib: Path | None = None) -> list[EditTask]:
    """One task per module, the kinds taking turns; deterministic for one Python version.

    A module with no candidate for its turn's kind (every mention of the name is also in a
    docstring, say) gets the next kind that has one.
    """
    root = Path(stdlib or sysconfig.get_paths()["stdlib"])
    tasks = []
    for i, module in enumerate(modules):
        path = root / f"{module}.py"
        if not path.is_file():
            continue
        source = path.read_text(encoding="utf-8")
        turn = [KINDS[(i + k) % len(KINDS)] for k in range(len(KINDS))]
        task = next(filter(None, (module_task(module, source, kind) for kind in turn)), None)
        if task is not None:
            tasks.append(task)
    return tasks


def module_task(module: str, source: str, kind: str) -> EditTask | None:
    """Pick one window of `source` and one target in it for `kind`, with a fixed seed per module."""
    candidates = [(window, target) for window in windows(source) for target in targets(window, kind)]
    if not candidates:
        return None
    window, target = random.Random(f"whiz-bench-edits:{module}:{kind}").choice(candidates)
    instruction, carry_out = target
    expected = carry_out()
    return EditTask(
        suite="rename",
        task_id=f"{module}:{kind}",
        filename=f"{module}.py",
        instruction=instruction,
        code=window,
        expected=expected,
    )


def windows(source: str) -> Iterator[str]:
    """Windows of 40-60 whole top-level statements' lines, each ending with a def or a class.

    The window starts at the earliest top-level statement (decorators included) that keeps it
    within 60 lines, so it parses on its own.
    """
    lines = source.splitlines(keepends=True)
    body = ast.parse(source).body
    starts = [min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) for node in body]
    for node in body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        end = node.end_lineno or node.lineno
        fitting = [s for s in starts if MIN_LINES <= end - s + 1 <= MAX_LINES]
        if fitting:
            yield "".join(lines[min(fitting) - 1 : end])


Target = tuple[str, Callable[[], str]]
"""An instruction, and how to write the file that carries it out: called only for the target a
module's seed picks (tokenizing the window for every candidate took seconds per suite)."""


def targets(window: str, kind: str) -> list[Target]:
    """Every unambiguous edit of `kind` in the window, in source order."""
    tree = ast.parse(window)
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    found: list[Target] = []
    if kind == "rename-function":
        for fn in functions:
            new = fn.name + "_v2"
            uses = sum(isinstance(n, ast.Name) and n.id == fn.name for n in ast.walk(tree)) + 1
            if unambiguous(window, fn.name, new, uses):
                instruction = f"Rename the function `{fn.name}` to `{new}`, updating every reference to it."
                found.append((instruction, partial(rename_names, window, fn.name, new)))
    elif kind == "rename-parameter":
        for fn in functions:
            region = "".join(window.splitlines(keepends=True)[region_slice(fn)])
            for arg in all_args(fn.args):
                if arg in ("self", "cls"):
                    continue
                new = arg + "_arg"
                uses = sum(
                    (isinstance(n, ast.Name) and n.id == arg) or (isinstance(n, ast.arg) and n.arg == arg)
                    for n in ast.walk(fn)
                )
                if unambiguous(region, arg, new, uses) and not re.search(rf"\b{new}\b", window):
                    instruction = (
                        f"In the function `{fn.name}`, rename the parameter `{arg}` to `{new}`, "
                        "updating its uses in that function."
                    )
                    rename = partial(rename_names, window, arg, new, fn.lineno, fn.end_lineno)
                    found.append((instruction, rename))
    elif kind == "add-decorator":
        lines = window.splitlines(keepends=True)
        for fn in functions:
            if fn.decorator_list:
                continue
            instruction = f"Add the decorator `@{DECORATOR}` to the function `{fn.name}`."
            after = lines[: fn.lineno - 1] + [f"@{DECORATOR}\n"] + lines[fn.lineno - 1 :]
            found.append((instruction, partial("".join, after)))
    else:
        raise ValueError(f"unknown task kind {kind!r}")
    return found


def region_slice(fn: ast.AST) -> slice:
    return slice(fn.lineno - 1, fn.end_lineno)  # type: ignore[attr-defined]


def all_args(args: ast.arguments) -> list[str]:
    named = args.posonlyargs + args.args + args.kwonlyargs
    named += [a for a in (args.vararg, args.kwarg) if a is not None]
    return [a.arg for a in named]


def unambiguous(text: str, old: str, new: str, uses: int) -> bool:
    """True when every mention of `old` is a plain name the AST counted: none in a string, a
    comment, an attribute or a keyword argument, where a model could fairly do either."""
    return len(re.findall(rf"\b{old}\b", text)) == uses and not re.search(rf"\b{new}\b", text)


def rename_names(code: str, old: str, new: str, first_line: int = 1, last_line: int | None = None) -> str:
    """Replace NAME tokens `old` with `new` on lines first..last (1-based): strings, comments and
    other identifiers stay as they are."""
    lines = code.splitlines(keepends=True)
    last = last_line or len(lines)
    hits = [
        tok.start
        for tok in tokenize.generate_tokens(io.StringIO(code).readline)
        if tok.type == tokenize.NAME and tok.string == old and first_line <= tok.start[0] <= last
    ]
    for row, col in reversed(hits):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old) :]
    return "".join(lines)


# -- the free-form suite ---------------------------------------------------------------------------

# Chosen because the 0.5B answers them at length without looping at temperature 0 (a reply that
# repeats itself is copied by prompt lookup, and would not show drafts that miss).
FREEFORM_PROMPTS = (
    "Explain in one paragraph how TCP congestion control reacts to packet loss.",
    "Write a short bash script that backs up a directory to a timestamped tar.gz file.",
    "Describe the water cycle to a ten-year-old.",
    "Write a product description for a mechanical keyboard.",
    "Compare Python and Rust for writing command-line tools, in one paragraph.",
    "Give five tips for naming variables well, as a numbered list.",
)


def freeform_tasks() -> list[EditTask]:
    """New writing with nothing to copy; the prediction (`code`) is unrelated code, so it misses."""
    import textwrap

    unrelated = inspect.getsource(textwrap.TextWrapper._wrap_chunks)
    return [
        EditTask(suite="freeform", task_id=f"freeform:{i + 1}", filename="", instruction=p, code=unrelated)
        for i, p in enumerate(FREEFORM_PROMPTS)
    ]
