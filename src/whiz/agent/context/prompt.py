"""What the model is told: the system prompt (rules, action format, repository map) and the
first message of a turn (the task, with the files it names attached).

The prompt stays the same for the whole session, so the server's cached prefix stays valid. Its
head (the rules and how to act) is the same for every session of a mode, and what differs (the
test command, the repository) comes after it: a new session's first request finds that head
cached by the last one and prefills only the rest (a few hundred tokens, seconds of the deep
model's time on a small CPU). It is short: the default model is small and follows a few plain
rules better than many.
"""

from __future__ import annotations

import re

from whiz.agent.context.relevant import relevant_code
from whiz.agent.context.repomap import repo_map
from whiz.agent.editing.edits import EXAMPLE_FILE, EXAMPLE_REPLACE, EXAMPLE_SEARCH
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace
from whiz.agent.runs_check import shown

RULES = """\
You are whiz, a coding assistant working in the user's repository.
Make the smallest change that does the task. Change only the lines that must change; keep the
rest of the code, its names and its formatting exactly as they are."""

CHANGE_HOW = "write the file's path on its own line"
"""How the instructions say to aim an edit; the 0.5B writes it back as "To change the file, ..."."""

EXAMPLE_LOOKS = (f"READ {EXAMPLE_FILE}", f"READ {EXAMPLE_FILE} 20-60", "LIST path/to/dir", "GREP some text")
"""The instructions' example actions for looking at code."""

_LOOKS = "\n".join(EXAMPLE_LOOKS)
TEXT_ACTIONS = f"""\
To change a file, {CHANGE_HOW}, then a SEARCH/REPLACE block:

{EXAMPLE_FILE}
<<<<<<< SEARCH
{EXAMPLE_SEARCH}
=======
{EXAMPLE_REPLACE}
>>>>>>> REPLACE

Use one block per change. To create a file, leave the SEARCH part empty.
To rewrite a short file, write its path on its own line, then the complete new file in a ``` block.
To look at code, write one of these on its own line:
{_LOOKS}
{{run}}
When you have made the change, stop. If nothing needs changing, answer in plain words."""


def echoes_instructions(text: str) -> bool:
    """Whether a reply is the instructions written back (two of their examples), not actions:
    the 0.5B does so after being told its reply changed nothing, and its example READ, LIST and
    GREP lines then ran as actions on `path/to/`. No reply meant for this repository holds them."""
    lines = {line.strip() for line in text.splitlines()}
    looks = sum(example in lines for example in EXAMPLE_LOOKS)
    return looks + (EXAMPLE_SEARCH in text) + (CHANGE_HOW in text) >= 2


def repeats(reply: str, message: str) -> bool:
    """Whether a reply is only lines of the message it answers, written back (40 characters at
    the least): told "To write a file, put its path alone on a line, ...", the 0.5B wrote that
    back, and the turn ended on it as if it were an answer."""
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    # A fence is written back only where the message has it as a line: "in one ```python block"
    # in the message's words is no fence the reply copied.
    own = {line.strip() for line in message.splitlines()}
    return sum(map(len, lines)) >= 40 and all(
        (line in own) if line.startswith("```") else (line in message) for line in lines
    )


TOOL_ACTIONS = """\
Use the tools: read_file, list_files and search_text to look at code; edit_file to change a
file (old_text copied exactly from the file, new_text its replacement); create_file for a new
file{run}. When you have made the change, stop. If nothing needs changing, answer in plain words."""

READ_ONLY = """\
This session is read-only: you cannot change files or run commands. To look at code, write one
of these on its own line:
READ path/to/file.py
LIST path/to/dir
GREP some text
Then answer in plain words."""


def system_prompt(
    ws: Workspace,
    actions: str,
    *,
    read_only: bool = False,
    test_cmd: str | None = None,
    map_tokens: int = 1024,
    project: str = "",
) -> str:
    """The instructions for a session: rules, how to act, a map of the repository, and last the
    project's own instructions (`project`: `ProjectInstructions.render()`), nearest the task."""
    if test_cmd:
        command = shown(test_cmd)
        tests = f"After your edits the tests run with `{command}`; you will see their output if they fail."
    else:
        tests = "Do not run tests or other commands unless the user asks you to."
    parts = [RULES]
    if read_only:
        parts.append(READ_ONLY)
    elif actions == "tools":
        parts.append(TOOL_ACTIONS.format(run=", run_command only when the user asks you to run something"))
    else:
        parts.append(
            TEXT_ACTIONS.format(run="RUN shell command   (only when the user asks you to run something)")
        )
    parts.append(tests)  # after the head every session shares (the module's doc)
    tree = repo_map(ws, budget_tokens=map_tokens)
    if tree.strip():
        parts.append("The repository:\n" + tree.rstrip())
    if project:
        parts.append(project)
    return "\n\n".join(parts)


MAX_ATTACHED_FILES = 3
MAX_ATTACHED_CHARS = 24_000
_PATHISH = re.compile(r"[\w./-]*\.\w+")
"""A path or file name as a task writes it: `src/app.py`, `app.py`, `.env`."""


def mentioned_files(ws: Workspace, task: str, *, secrets: bool = True) -> list[str]:
    """Workspace files the task names, by path or by a file name that only one file has; with
    `secrets` False, none that looks like a secret (`Workspace.is_secret`)."""
    try:
        files = ws.list_files(".", limit=2000)
    except (OSError, WhizAgentError):
        return []
    if not secrets:
        files = [path for path in files if not ws.is_secret(path)]
    by_name: dict[str, list[str]] = {}
    for path in files:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    found: list[str] = []
    for word in _PATHISH.findall(task):
        word = word.removeprefix("./").rstrip(".")
        match = word if word in files else None
        if match is None and len(by_name.get(word, [])) == 1:
            match = by_name[word][0]
        if match and match not in found:
            found.append(match)
    return found[:MAX_ATTACHED_FILES]


CODE_TOKENS = 2048
"""Default budget for the code a task is about (`context.relevant_code`), beside the files it names."""


def task_message(
    ws: Workspace,
    task: str,
    *,
    code_tokens: int = CODE_TOKENS,
    evidence: str = "",
    first: bool = True,
    named_secrets: bool = True,
) -> tuple[str, list[str]]:
    """The user message that starts a turn, and the files shown whole in it (the likeliest to be
    edited last).

    Files the task names are attached, so a small model can edit at once instead of first
    asking to read them; they stay in the conversation, where prompt lookup finds them. Then the
    code the task (and `evidence`, a failing test's output) is about, within `code_tokens`:
    a task that names only a function still shows the model that function. `first`: the
    conversation's first message (a tiny repository goes whole then, see `relevant_code`).
    `named_secrets`: the user wrote the task, so a secret-looking file it names is attached too
    (naming it is asking for it); never one the task does not name.
    """
    attached, blocks = [], []
    for path in mentioned_files(ws, task, secrets=named_secrets):
        try:
            text = ws.read_text(path)
        except (OSError, UnicodeDecodeError, WhizAgentError):
            continue
        if len(text) > MAX_ATTACHED_CHARS:
            continue
        attached.append(path)
        blocks.append(f"{path}:\n```\n{text}{'' if text.endswith(chr(10)) else chr(10)}```")
    spent = sum(len(b) for b in blocks) // 4
    snippets = relevant_code(ws, [task, evidence], code_tokens - spent, skip=set(attached), whole_repo=first)
    if snippets:
        blocks.append("Code this task may concern:\n\n" + "\n\n".join(s.render() for s in snippets))
        if not attached:  # the most relevant whole file is the one a bare code block rewrites
            attached = [s.path for s in reversed(snippets) if s.whole]
    if not blocks:
        return task, []
    return task + "\n\n" + "\n\n".join(blocks), attached
