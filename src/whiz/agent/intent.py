"""What a task asks for, read simply: whether it wants a change, what kind, and which file it names.

A small model often answers a change request with code in a fence and no path, or with words
alone; taking that for "done" reports success for nothing. So a turn whose task asks for a
change must end with one, and a reply holding code but no usable edit is either the file the
task names (one file, one block) or sent back saying what was missing.
"""

from __future__ import annotations

import re

from whiz.agent.editing.definitions import code_blocks, definition_edits, method_edits, part_of_file
from whiz.agent.editing.edits import WholeFile
from whiz.agent.project.workspace import Workspace
from whiz.agent.tools import Action, ApplyEdits, Malformed

# A task that starts with one of these words (or ends with "?") asks a question or for something
# to be looked at or run, not for a change.
NOT_A_CHANGE = frozenset(
    """what why how where which who when whose is are was were does do did can could should would will
    explain describe show list tell summarize summarise review find read run check look""".split()  # noqa: SIM905
)
# A change request says what to do to the code with one of these verbs.
CHANGE_VERBS = frozenset(
    """fix add write create make implement change rename update refactor remove delete replace edit
    convert move build rewrite modify insert append extend improve optimize optimise support handle
    port correct repair adjust patch generate""".split()  # noqa: SIM905
)
# A change whose every verb is one of these rearranges code without changing what it does.
MECHANICAL_VERBS = frozenset(
    """rename move reorder format reformat indent dedent reindent lint tidy""".split()  # noqa: SIM905
)
# What a mechanical edit is about, where its verb (add, fix, remove, update) could ask for anything.
MECHANICAL_SUBJECT = re.compile(
    r"\b(typos?|spelling|docstrings?|comments?|type hints?|type annotations?|annotations?|"
    r"unused imports?|imports? order|whitespace|trailing spaces?|formatting|indentation|decorators?)\b",
    re.I,
)
# The verbs a mechanical subject may go with ("add a docstring", "fix the typo").
SUBJECT_VERBS = frozenset(["add", "fix", "update", "remove", "delete", "write", "improve", "correct"])
# Verbs that ask for different behaviour though they do not name a change of code ("sort the
# list", "return None when ..."): beside a mechanical subject, the task is not mechanical. (Not
# words that are as often a function's name: parse, check, count, print.)
BEHAVIOUR_VERBS = frozenset(
    """sort return raise compute calculate validate handle ensure allow accept reject skip
    ignore""".split()  # noqa: SIM905
)
_CODE_SPAN = re.compile(r"`[^`]*`")
# Extensions of files a task would ask to write; "e.g." or "pygame.init" are not files.
FILE_EXTENSIONS = frozenset(
    """py pyi js mjs ts tsx jsx html css md txt json toml yaml yml cfg ini sh go rs c h cc cpp hpp
    java kt rb php cs sql lua""".split()  # noqa: SIM905
)
_PATH = re.compile(r"(?<![\w/.-])([\w./-]*\w\.(\w+))(?![\w/-])")

MISSING_EDIT = (
    "Your reply has code but no edit, so nothing was written. To write a file, put its path alone on "
    "a line, then the complete file in a ``` block; to change part of a file, use SEARCH/REPLACE "
    "blocks with the path before them."
)


def asks_for_change(task: str) -> bool:
    """Whether `task` asks for files to change: it uses a verb that changes code (`CHANGE_VERBS`:
    fix, add, write, ...), is not a question (no "?" at the end) and does not start with a word
    that asks to look, explain or run (`NOT_A_CHANGE`)."""
    text = task.strip()
    if not text or text.endswith("?"):
        return False
    words = [w.lower() for w in re.findall(r"[A-Za-z']+", text)]
    return bool(words) and words[0] not in NOT_A_CHANGE and any(w in CHANGE_VERBS for w in words)


def change_kind(task: str) -> str | None:
    """What kind of change `task` asks for: "mechanical" (a rename, a move, formatting, a typo, a
    docstring or comment, type hints: what the code does stays as it was), "behaviour" (any other
    request: a fix, a feature, a new program, "return the last match instead"), or None for a
    question or a request to look, explain or run (a "?" at the end, or a first word such as
    what, explain, find, run, with no verb of change or behaviour after it).

    The distinction is what a mode may route on: a mechanical edit is copied, not reasoned out, so
    the small model does it as well and sooner; a change of behaviour is where a larger model is
    right more often. Many requests for new behaviour name no verb of change ("Ignore invalid
    inputs.", "Return all longest strings as a list."), so any request that is not a question and
    not mechanical counts as behaviour."""
    words = prose_words(task)
    if not words or task.strip().endswith("?"):
        return None
    verbs = {w for w in words if w in CHANGE_VERBS or w in MECHANICAL_VERBS}
    acts = any(w in BEHAVIOUR_VERBS for w in words[1:])
    if words[0] in NOT_A_CHANGE and not acts and not verbs - MECHANICAL_VERBS:
        return None  # "explain the rename", "find the bug": not "find and fix the bug"
    behaves = any(w in BEHAVIOUR_VERBS for w in words)
    if verbs and verbs <= MECHANICAL_VERBS and not behaves:
        return "mechanical"
    subject = MECHANICAL_SUBJECT.search(_CODE_SPAN.sub(" ", task))
    if subject and verbs and not (verbs - MECHANICAL_VERBS - SUBJECT_VERBS) and not behaves:
        return "mechanical"
    return "behaviour"


def prose_words(task: str) -> list[str]:
    """The task's words, lower-cased, without code: `spans` in backticks and identifiers
    (`add_type`, `x2`) are names, not verbs."""
    text = _CODE_SPAN.sub(" ", task)
    return [w.lower() for w in re.findall(r"[\w']+", text) if w.replace("'", "").isalpha()]


def named_paths(task: str) -> list[str]:
    """File paths the task names, existing or not ("in snake.py"), in order."""
    found = []
    for path, ext in _PATH.findall(task):
        path = path.removeprefix("./")
        if ext.lower() in FILE_EXTENSIONS and path not in found:
            found.append(path)
    return found


def code_without_edit(reply: str, task: str, ws: Workspace) -> Action | None:
    """For a reply with no edit in it: the edit its code stands for, or what the model must be told.

    None when there is nothing to act on: the task asks for no change, or the reply holds no code.
    When the task names exactly one file and the reply holds one code block, the block is that
    file, unless it is only some of that file's functions (written over the file, it would delete
    the rest). A block of methods alone, out of their class, replaces those methods, and code
    blocks that only redefine functions or classes of the workspace replace those
    (`definitions.py`). Otherwise the reply is malformed: the model is told what was missing and
    tries again.
    """
    if not asks_for_change(task):
        return None
    blocks = code_blocks(reply)
    if not blocks:
        return None
    if edits := method_edits(ws, reply) or method_edits(ws, reply, as_is=True):  # never the whole file
        return ApplyEdits(edits)
    paths = named_paths(task)
    if len(paths) == 1 and len(blocks) == 1 and not part_of_file(ws, paths[0], blocks[0]):
        return ApplyEdits([WholeFile(paths[0], blocks[0])])
    if edits := definition_edits(ws, reply) or definition_edits(ws, reply, as_is=True):
        return ApplyEdits(edits)
    return Malformed(MISSING_EDIT, is_edit=True)
