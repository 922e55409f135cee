"""Repair: candidates that each rewrite one localized function whole.

After localization (`localize.py`) names a function, each candidate is that function written
out again, fixed. The request carries the function's current text as its prediction, so whiz's
exact speculative decoding accepts the unchanged lines in batches and a rewrite costs little
more than the lines it changes. The candidates differ on purpose: they spread over the places
found, over hypotheses (every other candidate of a place is asked without its hypothesis), over
temperatures (the first of a place is its most likely reply) and over seeds.

A candidate is turned into an edit by putting its function where the old one was
(`function_change`), indented as the old one was. A place that is a class (a task that adds a
method) takes the class written whole, or the methods the reply writes, put into it. Two
candidates whose changes are the same but for whitespace and comments (`change_key`) are one
candidate: the second is not tested again, and does not count toward N (`RepairPlan`); a model
that keeps writing the same reply ends after a bounded number of draws. A place with no
hypothesis whose rewrite comes back unchanged is asked, once, what is wrong in it (`explain`),
and its next draws are told.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import io
import re
import textwrap
import tokenize
from dataclasses import dataclass
from typing import Any

from whiz.agent.editing.definitions import DEFINITION_NODES, code_blocks
from whiz.agent.editing.edits import FileChange
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace
from whiz.agent.runs_check import shown
from whiz.modes.candidates import CandidateSource, CandidateStream, Draw, Generation, generate, relay
from whiz.modes.localize import (
    RENAMING,
    Function,
    Localization,
    bug_stated,
    definitions_in,
    functions_in,
)

TEMPERATURES = (0.0, 0.5, 0.8, 1.0, 1.2)
"""A place's candidates, in turn: its most likely reply, then samples ever further from it. The
cooler samples of a small model mostly write the function back or repeat one change; some fixes
come only from the hottest, and the cooler ones keep the fixes a hot sample loses."""
MAX_DRAWS_PER_N = 3
"""Candidates drawn at most, per distinct candidate wanted: a model that repeats itself stops."""
MAX_TOKENS_OVER_FUNCTION = 256
"""A rewrite's token cap beyond its function's own length (in characters / 3)."""
WRITTEN_BACK = "Written back as it is, the code stays wrong: that was tried, and it is no fix. Change it."
"""Said to a place's later draws once one wrote it back unchanged, which a small model does often."""

QUESTION = (
    "Before any code: what is wrong in it, for this task and these tests? Answer in one line, "
    "nothing else:\nBUG: <the wrong code, and what it should do instead>"
)
"""Asked of a place with no hypothesis that a rewrite wrote back unchanged (`explain`): told
nothing of what is wrong, a small model writes the function back as it is again and again;
told it in a sentence, it changes it."""
EXPLAIN_MAX_TOKENS = 100
HYPOTHESIS_TEMPERATURE = 0.8
"""Where several hypotheses are drawn together (`explain` with n > 1): warm enough that they
differ, since the most likely one has often only restated what the function should do."""
MAX_HYPOTHESIS_CHARS = 400

INSTRUCTIONS = (
    "You fix bugs in Python functions. The function you are shown is wrong: the tests fail on it. "
    "Reply with the fixed function in one ```python code block, and nothing else."
)


@dataclass(frozen=True)
class Attempt:
    """One candidate to draw: where, at what temperature, with which seed."""

    place: Localization
    temperature: float
    seed: int | None
    hypothesis: bool = True
    """Whether its request gives the place's hypothesis: every other one of a place does not, in
    case the hypothesis is wrong."""
    written_back: bool = False
    """Whether an earlier draw of its place wrote the code back unchanged: its request says that
    is no fix."""


class RepairPlan:
    """Which candidates to draw next, and which changes were tested already.

    `attempts(k)` gives the next k draws: places in turn, each place's temperatures in turn
    (a temperature-0 reply is drawn once per place, since it repeats). `seen` records each
    distinct change tested; `distinct` counts them toward N. The plan ends when N distinct
    candidates were tested, or `MAX_DRAWS_PER_N` * N draws were made."""

    def __init__(self, places: list[Localization], n: int, seed: int | None):
        self.places = places
        self.n = n
        self.seed = seed
        self.drawn = 0
        self.seen: set[tuple] = set()
        self._turn = [0] * len(places)
        self._issued: list[int] = []  # the place (by index) of each attempt given, in order
        self._written_back: set[int] = set()  # places (by index) a draw wrote back unchanged
        self._explained: set[int] = set()  # places given a hypothesis after a write-back
        self._fresh: set[int] = set()  # explained places not drawn since: their next draw is greedy
        self._hypotheses: dict[int, list[str]] = {}  # several, by place: its told draws take turns
        self._told: dict[int, int] = {}  # told draws of each place with several hypotheses

    @property
    def distinct(self) -> int:
        return len(self.seen)

    def done(self) -> bool:
        return self.distinct >= self.n or self.drawn >= MAX_DRAWS_PER_N * self.n

    def record(self, results: list[Any]) -> None:
        """A draw's candidates (`heal_results.CandidateResult`s): each change its own tests ran on counts
        toward N; a twin, a repeat of an earlier draw, or a reply with no edit does not. A result's
        `index` is its attempt's place in the order `attempts` gave them."""
        for result in results:
            if result.status in ("passed", "failed", "timeout") and result.same_as is None:
                self.seen.add(change_key(result.changes))
            if result.unchanged and 0 <= result.index < len(self._issued):
                self._written_back.add(self._issued[result.index])

    def wrote_back(self, slot: int) -> None:
        """An earlier stage's draw wrote the place back unchanged: it is explained before its
        first draw here (`unexplained`)."""
        self._written_back.add(slot)

    def unexplained(self) -> list[int]:
        """Places (by index) with no hypothesis that a draw wrote back unchanged, not yet
        explained (`explain`): the model did not see what is wrong in them."""
        return [
            slot for slot in sorted(self._written_back)
            if not self.places[slot].hypothesis and slot not in self._explained
        ]  # fmt: skip

    def explain(self, slot: int, hypotheses: list[str]) -> None:
        """The place's hypotheses, found after a write-back (`explain`): its later draws give them,
        as a place localized with one does (every other draw), in turn where there are several,
        so that each cause is tried; the first of them its most likely reply, which differs now
        that it is told more. Asked once per place."""
        self._explained.add(slot)
        if hypotheses:
            self.places[slot] = dataclasses.replace(self.places[slot], hypothesis=hypotheses[0])
            self._hypotheses[slot] = hypotheses
            self._fresh.add(slot)

    def attempts(self, k: int) -> list[Attempt]:
        """The next `k` draws (fewer when the bound is near)."""
        k = min(k, MAX_DRAWS_PER_N * self.n - self.drawn)
        out = []
        for _ in range(max(0, k)):
            slot = self.drawn % len(self.places)
            turn = self._turn[slot]
            self._turn[slot] += 1
            # After the first pass over the temperatures, only sampled ones: greedy repeats.
            temps = TEMPERATURES if turn < len(TEMPERATURES) else TEMPERATURES[1:]
            temperature = temps[turn % len(temps)]
            told = turn % 2 == 0
            if slot in self._fresh:
                self._fresh.discard(slot)
                temperature, told = 0.0, True
            seed = None if self.seed is None else self.seed + self.drawn
            back = slot in self._written_back
            place = self.places[slot]
            if told and len(hypotheses := self._hypotheses.get(slot, [])) > 1:
                nth = self._told.get(slot, 0)
                self._told[slot] = nth + 1
                place = dataclasses.replace(place, hypothesis=hypotheses[nth % len(hypotheses)])
            out.append(Attempt(place, temperature, seed, told, written_back=back))
            self._issued.append(slot)
            self.drawn += 1
        return out


def prediction(function: Function) -> str:
    """What a rewrite is expected to look like: the function as it is, in the fence asked for."""
    return f"```python\n{textwrap.dedent(function.source)}```"


@dataclass(frozen=True)
class Brief:
    """What every rewrite of one repair round is told, beside its place."""

    task: str
    test_cmd: str
    failure: str = ""
    """What the tests said (`test_feedback.failure_summary`)."""
    note: str = ""
    """What the tests said of an earlier change (a ladder's edit, or the closest rewrite so far):
    said beside, or instead of, what they say of the code as it is."""
    new: str = ""
    """A function the task asks to be written anew (`new_function`): each place is shown as what
    the task refers to, and the rewrite asked for is the new function, not a fix of the place."""
    trace: str = ""
    """What the failing call does in one place, line by line (`trace.shown_trace`), shown after
    what the tests said to that place's rewrites."""
    traced: tuple[str, str] = ("", "")
    """The place `trace` is of: its path and qualname."""


def repair_messages(place: Localization, brief: Brief, note: str = "") -> list[dict[str, Any]]:
    """The conversation of one place's repair: the task, the function, what the tests said, the
    hypothesis, the notes, and that the function is wrong. In this order: a small model shown the
    function last and asked for it corrected tends to write it back as it is; with what failed
    after the code, and the plain statement that the code is wrong, it changes it. `note`: what
    is said to this draw alone (`WRITTEN_BACK`)."""
    parts = _shown(place, brief, note)
    fn = place.function
    what = "class" if fn.kind == "class" else "function"
    if _adds(place, brief):
        # Told that `fn` is wrong and asked for it fixed, a small model mostly writes it back
        # unchanged where the task wants a new function beside it, not a change of it.
        parts.append(
            f"`{brief.new}` does not exist yet, and the tests need it. Write `{brief.new}` as the "
            "task asks, whole, in one ```python block."
        )
    else:
        parts.append(f"The {what} above is wrong. Write `{fn.name}` fixed, whole, in one ```python block.")
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "\n\n".join(parts)}]


def explain_messages(place: Localization, brief: Brief) -> list[dict[str, Any]]:
    """The question of what is wrong in a place that has no hypothesis (`explain`): its repair's
    conversation up to the request, so that the server's prefix cache holds all but the question
    (the localization step's view of the workspace is a prompt of its own, many times the cost)."""
    parts = _shown(place, brief, "")
    parts.append(QUESTION)
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "\n\n".join(parts)}]


def _adds(place: Localization, brief: Brief) -> bool:
    fn = place.function
    return bool(brief.new) and fn.kind == "function" and not fn.indent


def _shown(place: Localization, brief: Brief, note: str) -> list[str]:
    """What a place's request shows before it asks: the task, the code, what the tests said, what
    the failing call does (where it was traced), the hypothesis and the notes."""
    fn = place.function
    owner = fn.qualname.rpartition(".")[0]
    if fn.kind == "class":
        where = f"{fn.path}, the class `{fn.name}`, where the change belongs"
    elif _adds(place, brief):
        where = f"{fn.path}, the function `{fn.name}`, which the task refers to"
    else:
        where = f"{fn.path}, {'a method of ' + owner + ', ' if owner else ''}the function with the bug"
    parts = [brief.task, f"{where}:\n{prediction(fn)}"]
    if brief.failure:
        parts.append(f"The tests (`{shown(brief.test_cmd)}`) fail:\n```\n{brief.failure}\n```")
    if brief.trace and brief.traced == fn.where:
        parts.append(brief.trace)
    if place.hypothesis:
        parts.append(f"Likely cause: {place.hypothesis}")
    parts += [x for x in (brief.note, note) if x]
    return parts


async def explain(
    source: CandidateSource, place: Localization, brief: Brief, seed: int | None, n: int = 1
) -> tuple[list[str], Generation]:
    """What is wrong in `place`, in the model's words, asked where a rewrite of it came back
    unchanged (`RepairPlan.unexplained`): its most likely answer, or (`n` > 1) `n` sampled
    answers drawn together, sharing the prompt, as distinct hypotheses for the place's later
    draws to try in turn. None where no reply says anything that reads as one. With what it cost."""
    draw = Draw(n, 0.0 if n == 1 else HYPOTHESIS_TEMPERATURE, EXPLAIN_MAX_TOKENS, seed)
    generation = await generate(source, explain_messages(place, brief), draw)
    said = [h for h in (said_bug(text) for text in generation.texts) if h]
    return list(dict.fromkeys(said)), generation


def said_bug(reply: str) -> str:
    """The hypothesis in an answer to `QUESTION`: what follows its `BUG:`, or a one-line answer
    without it; nothing from a reply that writes code instead."""
    stated = bug_stated(reply)
    if stated:  # markdown's emphasis taken off, a code span's quotes kept
        return stated.strip("*_").strip()[:MAX_HYPOTHESIS_CHARS]
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    if len(lines) == 1 and "```" not in reply and not lines[0].startswith(("def ", "class ")):
        return lines[0][:MAX_HYPOTHESIS_CHARS]
    return ""


def function_change(ws: Workspace, place: Localization, reply: str, task: str = "") -> FileChange | None:
    """The reply's rewrite of the place's function, put where the function is; None when the
    reply holds no such function, or the file changed since it was localized.

    The rewrite is the function of the same name, or, where the task names a new name for it
    ("Change the function name to all_suffixes"), the one function of the block under that name.
    Top-level functions the block adds beside it (a helper, a function the task asks for) go in
    after it, and imports it adds, at the top of the file: a rewrite that needs `re` or a helper
    is a rewrite too. A method may come inside its class, with new methods beside it, which go in
    after it. A class place is rewritten by `_class_body`."""
    fn = place.function
    try:
        text = ws.read_text(fn.path)
    except (OSError, UnicodeDecodeError, WhizAgentError):
        return None
    in_file = definitions_in(fn.path, text)
    now = [f for f in in_file if f.qualname == fn.qualname and f.start == fn.start and f.kind == fn.kind]
    if not now or now[0].source != fn.source:
        return None
    known = {f.name for f in in_file if "." not in f.qualname}
    for block in reversed(code_blocks(reply)):
        if fn.kind == "class":
            body = _class_body(fn, block, known)
        else:
            body = _function_body(fn, block, task, in_file, known)
        if body is None:
            continue
        body = body if body.endswith("\n") else body + "\n"
        if not fn.source.endswith("\n"):  # the file's last line, with no newline after it
            body = body.rstrip("\n")
        lines = text.splitlines(keepends=True)
        after = "".join(lines[: fn.start - 1]) + body + "".join(lines[fn.end :])
        return FileChange(fn.path, text, with_imports(after, block))
    return None


def _function_body(
    fn: Function, block: str, task: str, in_file: list[Function], known: set[str]
) -> str | None:
    """The block's rewrite of `fn`, indented as `fn`, with what it adds beside it (above). A
    block without `fn` that writes a function the task asks for (and `known`, the file's
    top-level names, lacks) adds it after `fn`, which stays as it is."""
    outer = _outermost(functions_in("", block))
    new = _rewrite_of(fn, outer, task)
    siblings: list[Function] = []
    owner = fn.qualname.rpartition(".")[0]
    if new is None and owner:  # the method inside its class
        cls = owner.rpartition(".")[2]
        inside = [f for f in functions_in("", block) if f.qualname.endswith(f"{cls}.{f.name}")]
        has = {f.name for f in in_file if f.qualname == f"{owner}.{f.name}"}
        new = next((f for f in inside if f.name == fn.name), None)
        siblings = [f for f in inside if f.name not in has and new is not None and f.indent == new.indent]
    added = [f for f in outer if f is not new and f.name not in known and f.name != fn.name]
    if new is None:
        asked = any(re.search(rf"\b{re.escape(f.name)}\b", task) for f in added)
        if fn.indent or not asked:
            return None
        body = fn.source if fn.source.endswith("\n") else fn.source + "\n"
    else:
        body = _indented(new, fn.indent)
    for extra in siblings:
        body += "\n" + _indented(extra, fn.indent)
    if not fn.indent:  # functions the block adds beside a top-level one
        for extra in added:
            body += "\n\n" + textwrap.dedent(extra.source).rstrip("\n") + "\n"
    return body


def _class_body(cls: Function, block: str, known: set[str]) -> str | None:
    """The block's rewrite of the class `cls`: the class of that name, whole (with the top-level
    functions and classes the block adds beside it), or else the block's methods put into the
    class as it is, each replacing the method of its name or added at the class's end."""
    outer = _outermost(definitions_in("", block))
    new = next((d for d in outer if d.kind == "class" and d.name == cls.name), None)
    if new is not None:
        body = _indented(new, cls.indent)
        if not cls.indent:
            for extra in outer:
                if extra is not new and extra.name not in known:
                    body += "\n\n" + textwrap.dedent(extra.source).rstrip("\n") + "\n"
        return body
    methods = [d for d in outer if d.kind == "function" and _is_method(d)]
    if not methods or len(methods) != len(outer):
        return None
    return _with_methods(cls, methods)


def _is_method(fn: Function) -> bool:
    """Written as a method: its first parameter is `self` or `cls`, or it is decorated."""
    try:
        node = ast.parse(textwrap.dedent(fn.source)).body[0]
    except (SyntaxError, ValueError, IndexError):
        return False
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    params = node.args.posonlyargs + node.args.args
    return bool(node.decorator_list) or (bool(params) and params[0].arg in ("self", "cls"))


def _with_methods(cls: Function, methods: list[Function]) -> str:
    """The class's source with `methods` in it: each replaces the class's own method of its name,
    or is added after the class's last line, indented as the class's body."""
    lines = cls.source.splitlines(keepends=True)
    own = {f.name: f for f in functions_in("", cls.source) if f.qualname == f"{cls.name}.{f.name}"}
    body_indent = next(iter(own.values())).indent if own else cls.indent + "    "
    added: list[str] = []
    replaced: list[tuple[Function, str]] = []
    for method in methods:
        if method.name in own:
            replaced.append((own[method.name], _indented(method, body_indent)))
        else:
            added.append(_indented(method, body_indent))
    for old, text in sorted(replaced, key=lambda pair: pair[0].start, reverse=True):
        lines[old.start - 1 : old.end] = [text if text.endswith("\n") else text + "\n"]
    source = "".join(lines)
    if not source.endswith("\n"):
        source += "\n"
    return source + "".join("\n" + text for text in added)


def _indented(fn: Function, indent: str) -> str:
    body = textwrap.indent(textwrap.dedent(fn.source), indent)
    return body if body.endswith("\n") else body + "\n"


def _outermost(functions: list[Function]) -> list[Function]:
    """The block's functions (or definitions) at its least indent (a method written alone counts
    as one)."""
    if not functions:
        return []
    least = min(len(f.indent) for f in functions)
    return [f for f in functions if len(f.indent) == least and "." not in f.qualname]


def _rewrite_of(fn: Function, outer: list[Function], task: str) -> Function | None:
    same = [f for f in outer if f.name == fn.name]
    if same:
        return same[0]
    if not RENAMING.search(task):  # "Add a function called f": f goes in beside, not instead
        return None
    renamed = [f for f in outer if re.search(rf"\b{re.escape(f.name)}\b", task)]
    return renamed[0] if len(renamed) == 1 else None


def with_imports(text: str, block: str) -> str:
    """`text` with the block's top-level imports of names it lacks, put after its own imports (or
    at its top). A name the file defines is not imported (a small model quotes
    `from stats import Counter` into stats.py). Unchanged when either does not parse."""
    try:
        have = ast.parse(text)
        wanted = ast.parse(block)
    except (SyntaxError, ValueError):
        return text
    imports = [node for node in have.body if isinstance(node, ast.Import | ast.ImportFrom)]
    bound = {_bound(alias) for node in imports for alias in node.names}
    bound |= {node.name for node in have.body if isinstance(node, DEFINITION_NODES)}  # its own, not imported
    missing = [
        ast.unparse(node)
        for node in wanted.body
        if isinstance(node, ast.Import | ast.ImportFrom) and any(_bound(a) not in bound for a in node.names)
    ]
    if not missing:
        return text
    lines = text.splitlines(keepends=True)
    if imports:
        at = max(node.end_lineno or node.lineno for node in imports)
    else:  # after a module docstring, if any
        first = have.body[0] if have.body else None
        docstring = isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant)
        at = (first.end_lineno or 0) if docstring and first is not None else 0
    head = "".join(lines[:at])
    if head and not head.endswith("\n"):
        head += "\n"
    return head + "".join(f"{line}\n" for line in missing) + "".join(lines[at:])


def _bound(alias: ast.alias) -> str:
    """The name an import binds: `import a.b` binds `a`, `from a import b as c` binds `c`."""
    return alias.asname or alias.name.split(".")[0]


def change_key(changes: list[FileChange]) -> tuple:
    """The changes with whitespace and comments taken out: two candidates with the same key make
    the same program."""
    return tuple(sorted((c.path, normalized(c.path, c.after)) for c in changes))


def normalized(path: str, text: str | None) -> str | None:
    """`text` as code without comments or layout: Python through its syntax tree (which also
    drops redundant parentheses and quote styles), anything else by its tokens where it
    tokenizes, else with `#` comments and runs of whitespace removed."""
    if text is None:
        return None
    if path.endswith(".py"):
        try:
            return ast.dump(ast.parse(text))
        except (SyntaxError, ValueError):
            pass
        try:
            tokens = tokenize.generate_tokens(io.StringIO(text).readline)
            skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
            return " ".join(t.string for t in tokens if t.type not in skip)
        except (tokenize.TokenError, SyntaxError, IndentationError):
            pass
    return " ".join(re.sub(r"#[^\n]*", "", text).split())


def attempt_messages(attempt: Attempt, brief: Brief) -> list[dict[str, Any]]:
    """The conversation an attempt's rewrite is asked in (`repair_messages`)."""
    place = attempt.place if attempt.hypothesis else dataclasses.replace(attempt.place, hypothesis="")
    return repair_messages(place, brief, WRITTEN_BACK if attempt.written_back else "")


def rewrite_tokens(fn: Function) -> int:
    """The output a rewrite of `fn` may take: the function again, and some lines more."""
    return len(fn.source) // 3 + MAX_TOKENS_OVER_FUNCTION


def attempts_stream(source: CandidateSource, attempts: list[Attempt], brief: Brief) -> CandidateStream:
    """One stream of the attempts' candidates, indexed in the attempts' order. Attempts that share
    a place and a temperature go in one request (n of them, seeds counting up from the first);
    the requests run at once, and the engine decodes them together."""
    groups: dict[tuple[int, float, bool, bool], list[int]] = {}
    for i, attempt in enumerate(attempts):
        key = (id(attempt.place), attempt.temperature, attempt.hypothesis, attempt.written_back)
        groups.setdefault(key, []).append(i)

    async def one(out: CandidateStream, indexes: list[int]) -> None:
        first = attempts[indexes[0]]
        fn = first.place.function
        messages = attempt_messages(first, brief)
        max_tokens = rewrite_tokens(fn)
        draw = Draw(len(indexes), first.temperature, max_tokens, first.seed, prediction=prediction(fn))
        await relay(out, source.stream(messages, draw), indexes)

    async def produce(out: CandidateStream) -> None:
        await asyncio.gather(*(one(out, indexes) for indexes in groups.values()))

    return CandidateStream(len(attempts), produce, "n")
