"""The two ways a model can ask for actions, chosen with `--actions`.

`tools`: native function calls (the server parses Qwen's `<tool_call>` blocks into Responses
`function_call` items). `text`: SEARCH/REPLACE or `*** Begin Patch` blocks in the reply, plus one
command a line for the rest (`READ path [a-b]`, `LIST [dir]`, `GREP text`, `RUN command`), as
Aider does for small models, which copy code more reliably than they escape it into JSON.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Literal

from whiz.agent.editing.actions import ParseError, parse_edits
from whiz.agent.editing.definitions import partial
from whiz.agent.editing.edits import SearchReplace, WholeFile
from whiz.agent.models.seam import ModelToolCall
from whiz.agent.tools import (
    Action,
    ApplyEdits,
    CallTool,
    ListFiles,
    Malformed,
    ReadFile,
    RunCommand,
    SearchText,
)

ActionFormat = Literal["text", "tools"]
FORMATS: tuple[ActionFormat, ...] = ("text", "tools")


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }


_STR = {"type": "string"}
_INT = {"type": "integer"}

TOOLS = [
    _fn(
        "read_file",
        "Show a file, or lines start_line..end_line of it.",
        {"path": _STR, "start_line": _INT, "end_line": _INT},
        ["path"],
    ),
    _fn("list_files", "List the files under a directory of the workspace.", {"path": _STR}, []),
    _fn(
        "search_text",
        "Find lines containing a text in the workspace's files.",
        {"text": _STR, "path": _STR},
        ["text"],
    ),
    _fn(
        "edit_file",
        "Replace old_text, copied exactly from the file, with new_text. Keep old_text short but unique.",
        {"path": _STR, "old_text": _STR, "new_text": _STR},
        ["path", "old_text", "new_text"],
    ),
    _fn(
        "create_file",
        "Create a new file with the given content.",
        {"path": _STR, "content": _STR},
        ["path", "content"],
    ),
    _fn(
        "run_command",
        "Run a shell command in the workspace and show its output.",
        {"command": _STR},
        ["command"],
    ),
]


def tool_action(call: ModelToolCall) -> Action:
    """The action a function call asks for, or `Malformed` saying what is wrong with it."""
    try:
        args = json.loads(call.arguments or "{}")
    except json.JSONDecodeError as exc:
        return Malformed(f"The arguments of {call.name} are not valid JSON ({exc.msg}). Call it again.")
    if not isinstance(args, dict):
        return Malformed(f"The arguments of {call.name} must be a JSON object.")
    spec = next((t for t in TOOLS if t["name"] == call.name), None)
    if spec is None:  # an MCP server's, or none: the toolbox knows which (and says so)
        return CallTool(call.name, args)
    missing = [k for k in spec["parameters"]["required"] if not isinstance(args.get(k), str)]
    if missing:
        return Malformed(
            f"{call.name} needs the string argument(s) {', '.join(missing)}.", call.name in _EDITS
        )
    match call.name:
        case "read_file":
            return ReadFile(args["path"], _int(args.get("start_line")), _int(args.get("end_line")))
        case "list_files":
            return ListFiles(args.get("path") or ".")
        case "search_text":
            return SearchText(args["text"], args.get("path") or ".")
        case "edit_file":
            if not args["old_text"]:
                return Malformed(
                    "edit_file needs old_text copied from the file; use create_file for new files.", True
                )
            return ApplyEdits([SearchReplace(args["path"], args["old_text"], args["new_text"])])
        case "create_file":
            return ApplyEdits([WholeFile(args["path"], args["content"])], create_only=True)
        case _:
            return RunCommand(args["command"])


_EDITS = ("edit_file", "create_file")

_CALL_JSON = re.compile(r'\{\s*"name"\s*:')


def unparsed_calls(text: str) -> int:
    """Calls the model began in its reply's text that the server could not read as calls: each
    `<tool_call>` tag, or `{"name": ...` JSON, left in the text (the server removes the ones it read).
    A tag and the JSON after it count once."""
    return max(text.count("<tool_call>"), len(_CALL_JSON.findall(text)))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and value > 0 else None


# -- text actions ---------------------------------------------------------------------------------

_BLOCKS = re.compile(
    r"^```.*?^```[ \t]*$|<<<<<<< SEARCH.*?>>>>>>> REPLACE|\*\*\* Begin Patch.*?\*\*\* End Patch",
    re.S | re.M,
)
_COMMAND = re.compile(r"^[ \t]*(?:[-*$>][ \t]*)?`?(READ|LIST|GREP|RUN|CALL)\b[ \t:]*(.*?)`?[ \t]*$", re.M)
_NAMED_CALL = re.compile(r"(?:^|[ \t`])([A-Za-z0-9_-]+__[\w.-]+)[ \t]*(\{.*\})[ \t`]*$")
"""An MCP tool's name (`server__tool`) and JSON arguments ending a line: a small model writes its
CALL without the verb, or inside a READ line (`READ notes.txt notes__read_note {"name": ...}`)."""
_BARE_CALL = re.compile(r"^[ \t]*`?([A-Za-z0-9_-]+__[\w.-]+)[ \t]*(\{.*\})`?[ \t]*$", re.M)
_RANGE = re.compile(r"^(.*?)(?:[ \t]+|:)(\d+)[ \t]*-[ \t]*(\d+)$")
_EDIT_MARKERS = ("<<<<<<<", ">>>>>>>", "*** Begin Patch", "*** Update File", "*** Add File")


def text_actions(text: str, focus: tuple[str, str] | None = None) -> list[Action]:
    """Actions written in a reply: edits first (applied together), then commands, in order.

    `focus` is the (path, text) of the file the model last saw. Small models often rewrite it in
    a fence without naming it; a fenced block that is clearly a version of it counts as its
    new text.
    """
    actions: list[Action] = []
    try:
        edits = parse_edits(text, whole_files=True)
    except ParseError as exc:
        actions.append(Malformed(exc.message, is_edit=True))
    else:
        if not edits and focus is not None:
            edits = _unnamed_rewrite(text, *focus)
        if edits:
            actions.append(ApplyEdits(edits))
        elif any(marker in text for marker in _EDIT_MARKERS):
            actions.append(Malformed(_EDIT_HELP, is_edit=True))
    outside = _BLOCKS.sub("", text)
    for verb, arg in _COMMAND.findall(outside):
        arg = arg.strip().strip("`").strip()
        if verb != "CALL" and (named := _NAMED_CALL.search(arg)):
            actions.append(_call(f"{named.group(1)} {named.group(2)}"))
        elif verb == "READ":
            actions.append(_read(arg) if arg else Malformed("READ needs a path: READ path/to/file"))
        elif verb == "LIST":
            actions.append(ListFiles(arg or "."))
        elif verb == "GREP":
            actions.append(SearchText(arg) if arg else Malformed("GREP needs a text to look for."))
        elif verb == "CALL":
            actions.append(_call(arg))
        elif arg:
            actions.append(RunCommand(arg))
    actions += [_call(f"{name} {args}") for name, args in _BARE_CALL.findall(outside)]
    return actions


_FENCED = re.compile(r"^```[\w+.-]*[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def _unnamed_rewrite(text: str, path: str, current: str) -> list[WholeFile]:
    """The one fenced block of `text`, as the new `path`, if it is mostly the same text."""
    blocks = _FENCED.findall(text)
    if len(blocks) != 1 or not current.strip() or len(current) > 20_000:
        return []
    if path.endswith(".py") and partial(current, blocks[0]):
        return []  # one function of the file, fixed: it replaces that function (`definitions.py`)
    if difflib.SequenceMatcher(None, current, blocks[0]).ratio() < 0.7:
        return []
    return [WholeFile(path, blocks[0])]


_CALL = re.compile(r"^([\w.-]+)[ \t]*(.*)$", re.S)


def _call(arg: str) -> CallTool | Malformed:
    """`CALL name {"arg": ...}` (no JSON: no arguments)."""
    found = _CALL.match(arg)
    if not found:
        return Malformed('CALL needs a tool name, then its arguments as JSON: CALL name {"arg": "value"}')
    name, raw = found.group(1), found.group(2).strip()
    if raw and not raw.startswith("{"):
        return CallTool(name, {}, plain=raw)  # words, not JSON: the toolbox knows if that fits
    try:
        args = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        return Malformed(f"The arguments of CALL {name} are not valid JSON ({exc.msg}).")
    if not isinstance(args, dict):
        return Malformed(f"The arguments of CALL {name} must be a JSON object.")
    return CallTool(name, args)


def _read(arg: str) -> ReadFile:
    found = _RANGE.match(arg)
    if found:
        return ReadFile(found.group(1).strip(), int(found.group(2)), int(found.group(3)))
    return ReadFile(arg)


_EDIT_HELP = (
    "Your edit block is not in the right form. Write the file path on its own line, then:\n"
    "<<<<<<< SEARCH\nthe exact lines to change, copied from the file\n=======\nthe new lines\n>>>>>>> REPLACE"
)
