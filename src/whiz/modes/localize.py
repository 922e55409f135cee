"""Localization: where a bug is, before any repair is written.

A short model step reads the task, what the failing tests said (`test_feedback`) and the code,
and answers in four lines: the file, the function, its lines, and a one-sentence hypothesis of
the bug. The answer is parsed strictly (`parse_hints`) and checked against the workspace's
Python functions (`definition_index`): a function that is not there is not a place to repair.
When the model is unsure (it names a file or function that does not exist, or more than one
function), the functions the task names and the one the failing traceback ends in are added as
further places, three at most, so repairs can try each. When nothing resolves, healing falls
back to plain candidates (`Healer.heal`).

A place can be a class too: a task that adds a method has no function to name yet, so a hint
naming a method that is not there (`Deck.shuffle`, or `shuffle` in a file that defines one
class and nothing else), or the class itself, resolves to the class, and the repair rewrites
the class whole.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from whiz.agent.context.prompt import mentioned_files, task_message
from whiz.agent.project.test_files import TestFiles
from whiz.agent.project.workspace import Workspace
from whiz.agent.runs_check import shown
from whiz.modes.candidates import CandidateSource, Draw, Generation, generate

MAX_PLACES = 3
MAX_FILES = 500
MAX_FILE_CHARS = 200_000
LOCALIZE_MAX_TOKENS = 120
LOCALIZE_CODE_TOKENS = 1500

INSTRUCTIONS = """You find where a bug is. Read the task, the failing tests and the code.
Answer in exactly four lines, nothing else:
FILE: <the path of the file with the bug>
FUNCTION: <the name of the function with the bug>
LINES: <first line>-<last line>
BUG: <one sentence: the wrong code, and what it should do instead>"""


@dataclass(frozen=True)
class Function:
    """A Python function of the workspace (or a class: `kind`): where it is, and its source."""

    path: str
    name: str
    """Its own name (`mean`); a method's is the method's, `qualname` says its class."""
    qualname: str
    start: int
    """First line (1-based, its decorators included)."""
    end: int
    """Last line (1-based, inclusive)."""
    indent: str
    source: str
    kind: str = "function"
    """"function" (methods too) or "class"."""

    @property
    def where(self) -> tuple[str, str]:
        """(path, qualname): the function as a heal's state knows it across its stages, whose
        localizations find it anew."""
        return self.path, self.qualname


@dataclass(frozen=True)
class Hint:
    """One place as the model named it; any part may be missing."""

    path: str | None = None
    function: str | None = None
    lines: tuple[int, int] | None = None
    hypothesis: str = ""


@dataclass(frozen=True)
class Localization:
    """A place to repair: a function that exists, and what the model thinks is wrong in it."""

    function: Function
    hypothesis: str = ""
    origin: str = "model"
    """"model" (the localization step named it), "task" (the task names it), "traceback", or
    "only" (the workspace's one function). A place found without the model (`named_place`,
    "only") has no hypothesis: the repair asks for one once a rewrite writes it back."""


@dataclass
class Localized:
    """What the localization step found: the places, in order, and what it cost."""

    places: list[Localization]
    sure: bool
    reply: str = ""
    generation: Generation | None = None
    hints: list[Hint] = field(default_factory=list)
    defined: set[str] = field(default_factory=set)
    """The names of every function, method and class of the workspace (`definition_index`), read
    once here for the repair that follows (`new_function`)."""


_KEY = re.compile(r"^[\s>*_#`-]*(FILE|FUNCTION|LINES?|BUG|HYPOTHESIS)[*_`]*\s*:\s*(.*)$", re.I | re.M)
_KEYS = {"FILE": "FILE", "FUNCTION": "FUNCTION", "LINE": "LINES", "LINES": "LINES", "BUG": "BUG"}
_KEYS["HYPOTHESIS"] = "BUG"
_NAME = re.compile(r"[A-Za-z_][\w.]*")
_RANGE = re.compile(r"(\d+)\s*(?:-|–|to|\.\.|:)\s*(\d+)|(\d+)")


def parse_hints(text: str) -> list[Hint]:
    """The places a localization reply names: one per FUNCTION name (a reply may name several),
    each with the FILE and LINES written before it (or after, where none came before) and the
    BUG line. Nothing at all for a reply without a FILE or a FUNCTION line."""
    fields = _fields(text)
    if not any(k in ("FILE", "FUNCTION") for k, _ in fields):
        return []
    hypothesis = _clean(_first_bug(fields))
    hints: list[Hint] = []
    path: str | None = None
    lines: tuple[int, int] | None = None
    pending = False  # a FILE seen with no FUNCTION after it yet
    for key, value in fields:
        if key == "FILE":
            if pending:
                hints.append(Hint(path, None, lines, hypothesis))
            path, lines, pending = _path(value), None, True
        elif key == "LINES":
            lines = _lines(value)
            if not pending and hints:  # LINES after the FUNCTION it belongs to
                hints[-1] = Hint(hints[-1].path, hints[-1].function, lines, hints[-1].hypothesis)
        elif key == "FUNCTION":
            names = _names(value)
            for name in names:
                hints.append(Hint(path, name, lines, hypothesis))
            pending = pending and not names
    if pending:
        hints.append(Hint(path, None, lines, hypothesis))
    return [h for h in hints if h.path or h.function]


def bug_stated(text: str) -> str:
    """The words of a reply's first BUG (or HYPOTHESIS) line that has any, as written; "" where
    there is none. The localization step's hints and the repair's question (`repair.explain`)
    read their hypothesis from it."""
    return _first_bug(_fields(text))


def _first_bug(fields: list[tuple[str, str]]) -> str:
    return next((v for k, v in fields if k == "BUG" and v), "")


def _fields(text: str) -> list[tuple[str, str]]:
    return [(_KEYS[k.upper()], v.strip()) for k, v in _KEY.findall(text)]


def _clean(value: str) -> str:
    return value.strip().strip("`*_").strip()


def _path(value: str) -> str | None:
    value = _clean(value).split()[0] if _clean(value) else ""
    value = value.strip("`'\",;:()").removeprefix("./")
    return value or None


def _names(value: str) -> list[str]:
    """Function names in a FUNCTION line: `mean`, `mean()`, `Stats.mean`, "mean and spread"."""
    value = re.sub(r"\([^)]*\)", "", _clean(value))
    names = []
    for word in re.split(r"[,\s]+|\band\b", value):
        word = word.strip("`'\"*:;.()")
        if word.startswith("def "):
            word = word[4:]
        if _NAME.fullmatch(word) and word not in ("def", "and", "none", "None", "the", "function"):
            names.append(word)
    return names


def _lines(value: str) -> tuple[int, int] | None:
    found = _RANGE.search(value)
    if found is None:
        return None
    if found.group(3):
        line = int(found.group(3))
        return (line, line)
    first, last = int(found.group(1)), int(found.group(2))
    return (min(first, last), max(first, last))


def definition_index(ws: Workspace, tests: TestFiles) -> list[Function]:
    """Every function, method and class of the workspace's Python files that are not tests."""
    found: list[Function] = []
    for path, text in ws.python_sources(limit=MAX_FILES, max_chars=MAX_FILE_CHARS, skip=tests):
        found.extend(definitions_in(path, text))
    return found


def functions_in(path: str, text: str) -> list[Function]:
    """The functions of one Python source, methods and nested ones included."""
    return [d for d in definitions_in(path, text) if d.kind == "function"]


def definitions_in(path: str, text: str) -> list[Function]:
    """The functions and classes of one Python source, in the order they start."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines(keepends=True)
    found: list[Function] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                end = child.end_lineno or child.lineno
                first = lines[start - 1]
                indent = first[: len(first) - len(first.lstrip())]
                source = "".join(lines[start - 1 : end])
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                name = child.name
                found.append(Function(path, name, prefix + name, start, end, indent, source, kind))
                walk(child, f"{prefix}{child.name}.")

    walk(tree, "")
    return found


def resolve(hint: Hint, index: list[Function]) -> tuple[Function | None, bool]:
    """The function a hint names, and whether the hint was exact (its file and its function as
    named). A function not in the named file, but in one other, is taken, unsure. A method that
    is not there yet resolves to its class (`Deck.shuffle` to `Deck`, `shuffle` to the class
    that is all the named file defines), unsure, and a class named as the function to the class."""
    functions = [f for f in index if f.kind == "function"]
    if hint.function:
        named = [f for f in functions if hint.function in (f.name, f.qualname)]
        here = [f for f in named if f.path == hint.path]
        if len(here) >= 1:
            return _nearest(here, hint.lines), True
        if len(named) == 1 or (named and len({f.path for f in named}) == 1):
            return _nearest(named, hint.lines), False
        if not named:
            return _owner(hint, index), False
        return None, False
    if hint.path:
        in_file = [f for f in functions if f.path == hint.path]
        if hint.lines:
            spanning = [f for f in in_file if f.start <= hint.lines[0] <= f.end]
            if spanning:
                return max(spanning, key=lambda f: f.start), False
        if len(in_file) == 1:
            return in_file[0], False
    return None, False


def _owner(hint: Hint, index: list[Function]) -> Function | None:
    """The class a hint's missing function belongs in: the class it is qualified with or that it
    names, else the class that is all the named file (or the workspace) defines at its top."""
    assert hint.function is not None
    classes = [c for c in index if c.kind == "class"]
    owner, _, _ = hint.function.rpartition(".")
    for name in (owner, hint.function) if owner else (hint.function,):
        named = [c for c in classes if name in (c.name, c.qualname)]
        here = [c for c in named if c.path == hint.path] or named
        if len(here) == 1:
            return here[0]
    top = [d for d in index if "." not in d.qualname and (d.path == hint.path or not hint.path)]
    if not top and hint.path:  # a file that is not there
        top = [d for d in index if "." not in d.qualname]
    return top[0] if len(top) == 1 and top[0].kind == "class" else None


def _nearest(functions: list[Function], lines: tuple[int, int] | None) -> Function:
    if lines is None:
        return functions[0]
    return min(functions, key=lambda f: abs(f.start - lines[0]))


_FRAME = re.compile(r'File "([^"]+)", line (\d+)|^(\S+\.py):(\d+):', re.M)
"""A traceback's frame (`File "x.py", line 3`) or pytest's short one (`x.py:3: in f`)."""


def frames(failure: str, root: str) -> list[tuple[str, int]]:
    """The workspace-relative (path, line) of each frame in `failure`, deepest first, once each."""
    found: list[tuple[str, int]] = []
    for match in reversed(list(_FRAME.finditer(failure))):
        path = (match.group(1) or match.group(3) or "").removeprefix(root.rstrip("/") + "/")
        line = int(match.group(2) or match.group(4))
        if not path.startswith("/") and (path, line) not in found:
            found.append((path, line))
    return found


def fallback_places(index: list[Function], task: str, failure: str, root: str) -> list[Localization]:
    """Places found without the model: the functions the task names (by a name defined once),
    then the function the failing output's last workspace frame is in, then the classes the task
    names (a task that adds a method names its class)."""
    places: list[Localization] = []
    words = list(dict.fromkeys(re.findall(r"[A-Za-z_]\w*", task)))
    functions = [f for f in index if f.kind == "function"]
    for word in words:
        named = [f for f in functions if f.name == word]
        if len(named) == 1:
            places.append(Localization(named[0], origin="task"))
    for path, line in frames(failure, root):
        inside = [f for f in functions if f.path == path and f.start <= line <= f.end]
        if inside:
            places.append(Localization(max(inside, key=lambda f: f.start), origin="traceback"))
            break
    for word in words:
        named = [c for c in index if c.kind == "class" and c.name == word]
        if len(named) == 1:
            places.append(Localization(named[0], origin="task"))
    return places


_ADDING = re.compile(r"\b(?:add|adds|adding|create|creates|implement|implements|new|write|writes)\b", re.I)
"""A task that asks for something new: the place may be a function still to write (or a class
to put a method in), which only the model's localization names."""
_WORD = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


RENAMING = re.compile(
    r"\brenam|\b(?:its|the|function|method|class) name\b|\b(?:name|call) it\b"
    r"|\bchange (?:the )?(?:`?\w+`? )?(?:function|method) to (?:[`'\"]\w+|\w+_\w*)",
    re.I,
)
"""A task that asks for a new name, said so ("Rename mean to average", "Change the function name
to f", "Change the `f` method to `g`"): not "a function shout(name)", whose parameter is a name
too, nor "the same name"."""

MISSING = re.compile(
    r"NameError: name '(\w+)' is not defined|has no attribute '(\w+)'|cannot import name '(\w+)'"
)


def new_function(task: str, failure: str, defined: set[str]) -> str:
    """The function the task asks to be written anew, where the tests fail for want of it: a name
    their failure says is missing, that the task names and the code does not define ("" where
    there is none). A rename ("Change the function name to f") is not one: it is a rewrite of the
    function under its new name (`_rewrite_of`)."""
    if RENAMING.search(task):
        return ""
    for match in MISSING.finditer(failure):
        name = next(g for g in match.groups() if g)
        if name not in defined and re.search(rf"\b{re.escape(name)}\b", task):
            return name
    return ""


def named_place(index: list[Function], task: str, failure: str, files: list[str]) -> Function | None:
    """The one function the task names, where that leaves no doubt of the place: a name (or
    `Class.method`) the task writes that exactly one function outside the tests has, among the
    files the task names (`files`) where it names any that define it. None (the model is asked)
    where the task names no function, or two, or a name several functions have, or asks for
    something new (`_ADDING`), or where the tests fail for want of a name it writes (a function
    to add beside the one it names)."""
    if _ADDING.search(task):
        return None
    if new_function(task, failure, {f.name for f in index}):
        return None
    functions = [f for f in index if f.kind == "function"]
    named: dict[tuple[str, int], Function] = {}
    for word in dict.fromkeys(_WORD.findall(task)):
        matches = [f for f in functions if word in (f.name, f.qualname)]
        if not matches and "." in word:  # `stats.mean`: a module's function
            matches = [f for f in functions if f.name == word.rpartition(".")[2]]
        in_files = [f for f in matches if f.path in files]
        matches = in_files or matches
        if len(matches) > 1:
            return None  # a name several functions have: which one is the model's to say
        for f in matches:
            named[(f.path, f.start)] = f
    if len(named) != 1:
        return None
    (place,) = named.values()
    return place


def places_from(hints: list[Hint], index: list[Function], task: str, failure: str, root: str) -> Localized:
    """The places to repair, from the model's hints and, where it is unsure, the fallbacks."""
    if not hints:  # a reply that names no place: no guess stands in for it
        return Localized([], False)
    places: list[Localization] = []
    exact = 0
    for hint in hints:
        function, sure = resolve(hint, index)
        if function is not None:
            places.append(Localization(function, hint.hypothesis))
            exact += sure
    sure = exact == 1 and len(places) == 1
    if not sure:
        places += fallback_places(index, task, failure, root)
    unique: dict[tuple[str, int], Localization] = {}
    for place in places:
        unique.setdefault((place.function.path, place.function.start), place)
    return Localized(list(unique.values())[:MAX_PLACES], sure, hints=hints)


def localize_messages(ws: Workspace, task: str, test_cmd: str, failure: str) -> list[dict[str, Any]]:
    """The localization step's conversation: the task with its code, and what the tests said."""
    text, _ = task_message(ws, task, code_tokens=LOCALIZE_CODE_TOKENS, evidence=failure)
    if failure:
        text += f"\n\nThe tests (`{shown(test_cmd)}`) fail:\n```\n{failure}\n```"
    text += "\n\nWhere is the bug? Answer in the four lines FILE, FUNCTION, LINES, BUG."
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": text}]


async def localize(
    source: CandidateSource,
    ws: Workspace,
    task: str,
    test_cmd: str,
    failure: str,
    *,
    seed: int | None = None,
    expected: str | None = None,
) -> Localized:
    """Ask the model where the bug is (its most likely answer), and resolve what it says.

    `expected`: what an earlier localization of the same heal answered, sent as the request's
    prediction. Asked again after failed rewrites, the model mostly answers as it did, since it
    reads the same task and code; exact speculative decoding then accepts that answer in
    batches. The answer is the model's own either way: only how fast it comes changes."""
    index = definition_index(ws, TestFiles(test_cmd))
    if not index:
        return Localized([], False)
    defined = {f.name for f in index}
    if len(index) == 1 and index[0].kind == "function":  # one function, no class: nothing to ask
        return Localized([Localization(index[0], origin="only")], True, defined=defined)
    if (named := named_place(index, task, failure, mentioned_files(ws, task))) is not None:
        return Localized([Localization(named, origin="task")], True, defined=defined)
    messages = localize_messages(ws, task, test_cmd, failure)
    draw = Draw(1, 0.0, LOCALIZE_MAX_TOKENS, seed, prediction=expected)
    generation = await generate(source, messages, draw)
    reply = generation.texts[0] if generation.texts else ""
    found = places_from(parse_hints(reply), index, task, failure, str(ws.root))
    found.reply, found.generation, found.defined = reply, generation, defined
    return found
