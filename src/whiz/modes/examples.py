"""The task's own examples as checks for a new program it asks for.

"Write app.py with handle(path) that returns (200, 'hello') for '/', (200, the sum) for
'/add?a=2&b=3' ..." says what two calls must give. A `--check` that only runs the program passes
a `handle` that answers '/add?a=2&b=3' by name (and crashes on any other sum), or that crashes on
the example itself but not on the check's own call. So for a new program whose task names a
function, the model is asked once for the task's examples as assert lines, and each candidate
that passes the check is then tried on them (`whiz.agent.examples_check`).

A small model asked for examples also invents some, and gets invented ones wrong about as often
as right (the 1.5B's tic-tac-toe boards: two of three named the wrong winner). So only an assert
that calls a function the task names, on arguments written in the task, is kept: the task's
examples, not the model's guesses. What an example must give is still the model's reading, so
examples rank candidates but never stand between the user and a program that passes its check
(`Healer`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from whiz.agent.examples_check import SUMMARY, examples_command
from whiz.modes.candidates import CandidateSource, Draw, generate

EXAMPLES_PROMPT = (
    "Task: {task}\n\n"
    "Do not write the program. Write the task's own examples as Python assert lines: each calls "
    "the function the task names on an input written in the task, and compares the result with "
    "what the task says it must be. One ```python block of assert lines, nothing else."
)
MAX_EXAMPLES = 6
EXAMPLES_MAX_TOKENS = 320
"""The 1.5B writes the program first whatever it is told, then the asserts: room for both."""

_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_QUOTED = re.compile(r"'([^'\n]*)'|\"([^\"\n]*)\"|`([^`\n]*)`")
_NUMBER = re.compile(r"-?\d+")
_VALUE = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|(?<![\w.])\d+(?![\w.])")


@dataclass
class Examples:
    """The task's examples for one new module: the assert lines, and the command that checks them."""

    module: str
    lines: list[str]
    hidden: list[str] = field(default_factory=list)
    """Those of `lines` whose arguments only have the form of the task's (other numbers): checked,
    but not shown to the model, which wrote a branch for each example it was shown (the 1.5B's
    `handle` grew an `elif path == ...` per example) instead of code for every input."""

    def command(self) -> str:
        return examples_command(self.module, self.lines)

    def shown(self, output: str) -> str:
        """What `examples_check` said, for the model: the hidden examples' lines left out, and how
        many of them failed said instead."""
        hidden = {line.removeprefix("assert ") for line in self.hidden}
        kept, failed = [], 0
        for line in output.splitlines():
            verdict, _, said = line.partition(": ")
            if verdict in ("held", "FAILED") and any(said == h or said.startswith(f"{h}: ") for h in hidden):
                failed += verdict == "FAILED"
                continue
            if line.startswith(SUMMARY) and failed:
                kept.append(
                    f"FAILED: {failed} more of the same form as the task's, with other values (not shown)"
                )
            kept.append(line)
        return "\n".join(kept)


def new_module(paths: list[str]) -> str | None:
    """The module a new program is imported as: the one Python file among `paths` (the new files
    the task names), at the top of the workspace; None otherwise."""
    python = [p for p in paths if p.endswith(".py")]
    if len(python) != 1 or "/" in python[0]:
        return None
    name = PurePosixPath(python[0]).stem
    return name if name.isidentifier() else None


def gives_examples(task: str, module: str) -> bool:
    """Whether the task could hold an example of its own: it names a function of the module as a
    call, and writes a value (a quoted string or a number). "Write hello.py with hi()" does not,
    and its program is not worth a model call for examples."""
    return bool(named_functions(task) - {module}) and _VALUE.search(task) is not None


def named_functions(task: str) -> set[str]:
    """The names the task writes as calls ("a function handle(path)", "to_roman(1994)")."""
    return set(_CALLED.findall(task))


def task_examples(reply: str, task: str, module: str, *, as_written: bool = False) -> list[str]:
    """The assert lines of `reply` that are the task's own examples: each compares one call of a
    function the task names, on literal arguments the task writes, with a literal value
    (`as_written`: written exactly so, not only of the same form)."""
    functions = named_functions(task) - {module}
    kept: list[str] = []
    for raw in reply.splitlines():
        line = raw.strip()
        if not line.startswith("assert ") or line in kept:
            continue
        try:
            (statement,) = ast.parse(line).body
        except (SyntaxError, ValueError):
            continue
        if isinstance(statement, ast.Assert) and _an_example(
            statement.test, task, functions, module, as_written
        ):
            kept.append(ast.unparse(ast.Assert(statement.test)))
    return kept[:MAX_EXAMPLES]


def _an_example(test: ast.expr, task: str, functions: set[str], module: str, as_written: bool) -> bool:
    compares = isinstance(test, ast.Compare) and len(test.ops) == 1
    if not (compares and isinstance(test.ops[0], ast.Eq | ast.Is)):
        return False
    call, want = test.left, test.comparators[0]
    if not isinstance(call, ast.Call) or not _literal(want):
        return False
    func = call.func
    named = func.id if isinstance(func, ast.Name) else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == module:
        named = func.attr
    arguments = [*call.args, *(k.value for k in call.keywords)]
    return named in functions and all(_literal(a) and _written_in(a, task, as_written) for a in arguments)


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _written_in(node: ast.expr, task: str, as_written: bool) -> bool:
    """Whether an argument is written in the task: a string quoted there, or of the same form as
    one with other numbers in it (the task's '/add?a=2&b=3' stands for "any other integers" too:
    '/add?a=10&b=-4'), a number standing on its own, anything else as the same text (spaces and
    quote marks aside)."""
    value = ast.literal_eval(node)
    if isinstance(value, str):
        quoted = ["".join(groups) for groups in _QUOTED.findall(task)]
        if value in quoted or as_written:
            return value in quoted
        form = _form(value)
        return form != value and form.strip("#-") != "" and form in map(_form, quoted)
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = ast.unparse(node)
        return re.search(rf"(?<![\w.]){re.escape(text)}(?![\w.])", task) is not None
    return _squeezed(ast.unparse(node)) in _squeezed(task)


def _form(text: str) -> str:
    """A string with each number in it (a sign and digits) made one mark: its form."""
    return _NUMBER.sub("#", text)


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text).replace('"', "'")


async def write_examples(
    source: CandidateSource, task: str, module: str, *, seed: int | None
) -> Examples | None:
    """The task's examples for `module`, written by `source`'s model (its most likely reply);
    None when the task gives no example (`gives_examples`) or its reply holds none of them."""
    if not gives_examples(task, module):
        return None
    messages = [{"role": "user", "content": EXAMPLES_PROMPT.format(task=task)}]
    generation = await generate(source, messages, Draw(1, 0.0, EXAMPLES_MAX_TOKENS, seed, False, True))
    lines = task_examples(generation.texts[0] if generation.texts else "", task, module)
    hidden = [line for line in lines if not task_examples(line, task, module, as_written=True)]
    return Examples(module, lines, hidden) if lines else None
