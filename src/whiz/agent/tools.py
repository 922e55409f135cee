"""What the agent can do: read a file (or some of its lines), list files, search text, edit or
create files, run a command. Each action runs here and becomes an `Outcome`: the text the model
reads back, and whether it worked.

How the model asks for actions (function tools or text in its reply) is `formats.py`'s business.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from whiz.agent.approvals import ApprovalMode, Approvals
from whiz.agent.context.test_feedback import told
from whiz.agent.editing.edits import (
    EXAMPLE_DIR,
    Edit,
    EditError,
    FileChange,
    WholeFile,
    aimed,
    apply_changes,
    plan_edits,
    unified_diff,
)
from whiz.agent.editing.undo import UndoStore
from whiz.agent.errors import WhizAgentError
from whiz.agent.events import Emitter
from whiz.agent.external import ExternalTool, ExternalTools, listing, plain_argument, specs
from whiz.agent.external import shown as shown_arguments
from whiz.agent.project.secret_files import MASK, SecretGate, mask
from whiz.agent.project.workspace import Workspace
from whiz.agent.runs_check import shown
from whiz.environments import SandboxOptions, environment_for
from whiz.environments.local import CommandResult, Environment, truncate

MAX_READ_LINES = 400
MAX_OUTPUT_CHARS = 8000
REPORTED_OUTPUT_CHARS = 4000
"""Output kept in the item of a test run the user asked for (`run_reported`)."""


@dataclass
class ReadFile:
    path: str
    start: int | None = None
    end: int | None = None


@dataclass
class ListFiles:
    path: str = "."


@dataclass
class SearchText:
    pattern: str
    path: str = "."


@dataclass
class ApplyEdits:
    edits: list[Edit]
    create_only: bool = False
    """From `create_file`: refuse to overwrite a file that exists."""


@dataclass
class RunCommand:
    command: str


@dataclass
class CallTool:
    """A call of an external tool (an MCP server's), by the name the model was offered."""

    name: str
    arguments: dict
    plain: str | None = None
    """Words written after the name in text instead of JSON (`CALL notes__read shop`): taken as
    the tool's one required string argument, where it has one."""


@dataclass
class Malformed:
    """An action the model got wrong (bad arguments, an edit block that does not parse)."""

    message: str
    is_edit: bool = False


Action = ReadFile | ListFiles | SearchText | ApplyEdits | RunCommand | CallTool | Malformed


@dataclass
class Outcome:
    """`text` goes back to the model. `ok` is False for anything that did not happen."""

    text: str
    ok: bool = True
    malformed: bool = False
    changed: list[str] = field(default_factory=list)
    noop: bool = False
    """An edit that changes nothing (a whole file quoted as it is, a block's new text its old)."""
    quoted: list[str] = field(default_factory=list)
    """The files such an edit wrote back as they are."""


class WriteFailed(WhizAgentError):
    """Files could not be written (disk full, permissions): the turn ends, nothing half-applied."""


WITHDRAWN_COMMANDS = "No more commands run in this turn: answer, or edit files, with what you have."
"""What the model reads once commands were refused twice in a turn (see `Toolbox._command`)."""


class Toolbox:
    """Runs actions in one workspace, under the session's approvals, reporting items as events."""

    def __init__(
        self,
        workspace: Workspace,
        environment: Environment,
        approvals: Approvals,
        emitter: Emitter,
        *,
        undo: UndoStore | None = None,
        command_timeout_s: float = 120.0,
        secrets: SecretGate | None = None,
    ):
        self.ws = workspace
        self.env = environment
        self.approvals = approvals
        self.emit = emitter
        self.undo = undo
        self.command_timeout_s = command_timeout_s
        self.focus: str | None = None
        """The file last read or edited: the likeliest one to be rewritten next."""
        self.wanted: set[str] = set()
        """Files the task names (`intent.named_paths`): a new one may be written however the
        model puts it (see `_known_path`)."""
        self.protected: set[str] = set()
        """Files edits leave alone: the tests that decide (see `Agent`), which a small model
        otherwise quotes back changed, or rewrites until they pass."""
        self.secrets = secrets or SecretGate(workspace)
        """The secret-looking files the model may see (those the user named or let it read); every
        outcome has the others' values masked."""
        self.external: ExternalTools | None = None
        """Tools of the MCP servers the user configured, offered beside these (`external.py`)."""
        self._read_calls: dict[str, str] = {}
        """This turn's calls of read-only external tools (name and arguments) and what they gave,
        since the last edit or command (either may change what such a tool reads)."""
        self._withdrawn: set[str] = set()
        """Tools taken off the offered list until the turn ends, so the next reply answers or
        does something else: external tools the model called again with the same arguments or
        whose call was declined, and `run_command` once commands were declined twice."""
        self._declined_commands = 0
        self._turn_id = ""

    def begin_turn(self, turn_id: str) -> None:
        """Edits from here on belong to `turn_id`, one undo snapshot for the whole turn."""
        self._turn_id = turn_id
        self._read_calls = {}
        self._withdrawn = set()
        self._declined_commands = 0

    def focus_text(self) -> tuple[str, str] | None:
        """(path, text) of the focus file, if it is there and readable."""
        if self.focus is None or self.secrets.withheld(self.focus):
            return None  # a prediction goes to the model too
        try:
            return self.focus, self.ws.read_text(self.focus)
        except (OSError, WhizAgentError):
            return None

    def prediction(self) -> str | None:
        """The focus file's text: a rewrite (or a SEARCH/REPLACE block) copies much of it."""
        found = self.focus_text()
        return self.secrets.redact(found[1]) if found and len(found[1]) <= 64_000 else None

    async def offer(self, instructions: str, tools: list[dict] | None) -> tuple[str, list[dict] | None]:
        """The next request's instructions and function tools (None: text actions) with the external
        tools added: as functions, or listed in the instructions. A read-only session is offered only
        the tools that say they only read."""
        if tools is not None and self._withdrawn:
            tools = [t for t in tools if t.get("name") not in self._withdrawn]
        extra = [t for t in await self._external_tools() if t.name not in self._withdrawn]
        if not extra:
            return instructions, tools
        if tools is not None:
            return instructions, tools + specs(extra)
        return f"{instructions}\n\n{listing(extra)}", None

    async def external_names(self) -> list[str]:
        """The names of the external tools this session may call (waiting, the first time, for
        servers still starting)."""
        return [t.name for t in await self._external_tools()]

    async def _external_tools(self) -> list[ExternalTool]:
        if self.external is None:
            return []
        tools = await self.external.tools()
        return [t for t in tools if t.read_only] if self.approvals.mode is ApprovalMode.READ_ONLY else tools

    async def run(self, action: Action) -> Outcome:
        outcome = await self._run(action)
        # Whatever the action, values of withheld secret files stay out of what the model reads
        # back: `cat .env` in a command, a test that prints its settings, an edit's error message.
        outcome.text = self.secrets.redact(outcome.text)
        return outcome

    async def run_tests(self, command: str) -> Outcome:
        """The test command, run as any command is; a failing run's outcome, which the model reads,
        is what the tests said (`test_feedback.told`: what failed, not all they printed, warnings
        first as often as not), while its `command_execution` item keeps everything for the user."""
        outcome = await self.run(RunCommand(command))
        if not outcome.ok:
            outcome.text = told(outcome.text, str(self.ws.root))
        return outcome

    async def _run(self, action: Action) -> Outcome:
        match action:
            case Malformed():
                return Outcome(action.message, ok=False, malformed=True)
            case ReadFile():
                return await self._tool("read_file", action, self._read)
            case ListFiles():
                return await self._tool("list_files", action, self._list)
            case SearchText():
                return await self._tool("search_text", action, self._search)
            case ApplyEdits():
                return await self._edit(action)
            case RunCommand():
                return await self._command(action.command)
            case CallTool():
                return await self._call(action)
        raise TypeError(f"not an action: {action!r}")

    async def _tool(self, name: str, action: Action, run) -> Outcome:
        item = self.emit.start("tool_call", tool=name, arguments=vars(action).copy(), status="in_progress")
        try:
            outcome = run(action)
            if not isinstance(outcome, Outcome):
                outcome = await outcome
        except (WhizAgentError, OSError, UnicodeDecodeError) as exc:
            outcome = Outcome(f"{name} failed: {getattr(exc, 'message', None) or exc}", ok=False)
        outcome.text = self.secrets.redact(outcome.text)
        self.emit.complete(
            item, output=truncate(outcome.text, 2000), status="completed" if outcome.ok else "failed"
        )
        return outcome

    async def _read(self, action: ReadFile) -> Outcome:
        text, note = self.ws.read_text(action.path), ""
        if self.secrets.withheld(action.path):
            decision = await self.approvals.secret(action.path)
            if decision.allowed:
                self.secrets.grant(action.path)
            else:
                text, note = mask(text), _masked_note(decision.reason)
        lines = text.splitlines(keepends=True)
        self.focus = action.path
        first = max(1, action.start or 1)
        last = min(len(lines), action.end or len(lines))
        if action.start is None and len(lines) > MAX_READ_LINES:
            last = MAX_READ_LINES
        body = "".join(lines[first - 1 : last])
        where = "" if (first, last) == (1, len(lines)) else f" (lines {first}-{last} of {len(lines)})"
        more = (
            f"\nThe file goes on; READ {action.path} {last + 1}-{len(lines)} shows more."
            if last < len(lines)
            else ""
        )
        return Outcome(
            f"{note}{action.path}{where}:\n```\n{body}{'' if body.endswith(chr(10)) else chr(10)}```{more}"
        )

    def _list(self, action: ListFiles) -> Outcome:
        files = self.ws.list_files(action.path, limit=300)
        if not files:
            return Outcome(f"No files under {action.path}.")
        withheld = [path for path in files if self.secrets.withheld(path)]
        note = (
            f"\n({', '.join(withheld)}: {'looks' if len(withheld) == 1 else 'look'} like secrets; "
            "a READ asks the user, and shows the values masked unless they agree.)"
            if withheld
            else ""
        )
        return Outcome("\n".join(files) + note)

    def _search(self, action: SearchText) -> Outcome:
        hits = self.ws.search(action.pattern, action.path, limit=50)
        hits = [hit for hit in hits if not self.secrets.withheld(hit[0])]
        hits = sorted(hits + self._masked_hits(action.pattern, action.path))[:50]
        if not hits:
            return Outcome(f"No matches for {action.pattern!r}.")
        return Outcome("\n".join(f"{path}:{line_no}: {line.rstrip()}" for path, line_no, line in hits))

    def _masked_hits(self, pattern: str, under: str) -> list[tuple[str, int, str]]:
        """Lines of the withheld secret files under `under` that match `pattern` as masked: the
        lines as they are never decide, or a search would tell, hit or miss, what a value holds."""
        try:
            regex = re.compile(pattern)
        except re.error:
            regex = re.compile(re.escape(pattern))
        hits = []
        for path in self.ws.list_files(under, limit=100_000):
            if not self.secrets.withheld(path):
                continue
            try:
                masked = mask(self.ws.read_text(path))
            except WhizAgentError:
                continue  # not text: nothing a search finds
            hits += [(path, n, line) for n, line in enumerate(masked.splitlines(), 1) if regex.search(line)]
        return hits

    def _known_path(self, edit: Edit) -> Edit:
        """An edit of a file that does not exist, aimed where it was meant (`edits.aimed`: the one
        file of that name, or a file the task names). A whole new file under another path than
        the example folder's is taken as written: a new file beside one of the same name may
        well be meant."""
        if isinstance(edit, WholeFile) and not edit.path.startswith(EXAMPLE_DIR):
            return edit
        files = lambda: self.ws.list_files(".", limit=5000)  # noqa: E731
        return aimed(edit, self.ws.exists, files, self.wanted)

    async def _edit(self, action: ApplyEdits) -> Outcome:
        kept, left_out = self._unprotected(action.edits)
        if left_out and not kept:
            note = _protected_note(left_out) + " Change the code, not the tests."
            return Outcome(note, ok=False, malformed=True)
        if left_out:
            outcome = await self._edit(ApplyEdits(kept, action.create_only))
            outcome.text += f" {_protected_note(left_out)}"
            return outcome
        if (refused := await self._secret_edits(action.edits)) is not None:
            return refused
        try:
            for edit in action.edits:
                if action.create_only and self.ws.exists(edit.path):
                    raise EditError(f"{edit.path} already exists; change it with an edit instead.")
                if isinstance(edit, WholeFile) and self.ws.exists(edit.path):
                    _check_rewrite(edit.path, self.ws.read_text(edit.path), edit.content)
            edits = [self._known_path(e) for e in action.edits]
            if any(e.path.startswith(EXAMPLE_DIR) for e in edits) and not self.ws.exists(EXAMPLE_DIR):
                raise EditError(
                    f"{EXAMPLE_DIR} is the instructions' example folder, not a folder here: put the "
                    "file's own path before its block."
                )
            changes = plan_edits(self.ws, edits)
        except WhizAgentError as exc:  # EditError, or a path outside the workspace
            return Outcome(exc.message, ok=False, malformed=True)
        if not changes:
            # Code written back as it is, whole or as a SEARCH/REPLACE block whose halves match:
            # the loop says which (the tests fail on it, say) rather than "malformed".
            quoted = list(dict.fromkeys(e.path for e in edits))
            if all(isinstance(e, WholeFile) for e in action.edits):
                return Outcome("The file is unchanged.", noop=True, quoted=quoted)
            return Outcome(
                "The edit changes nothing: the new text is the same as the old.", noop=True, quoted=quoted
            )
        diff = "".join(unified_diff(c) for c in changes)
        paths = [c.path for c in changes]
        decision = await self.approvals.edit(f"edit {', '.join(paths)}", diff)
        summary = [{"path": c.path, "kind": _kind(c)} for c in changes]
        if not decision.allowed:
            self.emit.single("file_change", changes=summary, diff=diff, status="declined")
            return Outcome(f"Not applied: {decision.reason}", ok=False)
        self._snapshot(changes)
        try:
            apply_changes(self.ws, changes)
        except EditError as exc:
            self.emit.single("file_change", changes=summary, diff=diff, status="failed")
            if isinstance(exc.__cause__, OSError):  # disk full, permissions: the model can't fix it
                raise WriteFailed(exc.message) from exc
            return Outcome(exc.message, ok=False)
        self.emit.single("file_change", changes=summary, diff=diff, status="completed")
        self._read_calls.clear()  # a read-only tool may read otherwise now: it is called again
        self.focus = paths[-1] if paths else self.focus
        return Outcome(f"Applied the edit to {', '.join(paths)}.", changed=paths)

    async def _secret_edits(self, edits: list[Edit]) -> Outcome | None:
        """Ask before the model edits a secret-looking file that exists: the edit's diff and its
        error messages quote the file. None: go ahead; else the refusal."""
        for path in dict.fromkeys(p for e in edits for p in (e.path, getattr(e, "move_to", None)) if p):
            try:
                if not (self.ws.exists(path) and self.secrets.withheld(path)):
                    continue
            except WhizAgentError:
                continue  # a path outside the workspace: refused with its reason when planned
            if self.approvals.mode is ApprovalMode.READ_ONLY:
                decision = await self.approvals.edit(f"edit {path}", "")
            else:
                decision = await self.approvals.secret(path, "edit")
            if not decision.allowed:
                return Outcome(f"Not applied: {decision.reason}. Leave {path} as it is.", ok=False)
            self.secrets.grant(path)
        return None

    def _unprotected(self, edits: list[Edit]) -> tuple[list[Edit], list[str]]:
        """The edits that may be made, and the protected files the others would have changed."""
        kept, left_out = [], []
        for edit in edits:
            try:
                path = self.ws.relative(self.ws.resolve(edit.path))
            except WhizAgentError:
                path = edit.path  # outside the workspace: refused with its reason when planned
            if path in self.protected:
                left_out.append(path)
            else:
                kept.append(edit)
        return kept, sorted(set(left_out))

    def _snapshot(self, changes: list[FileChange]) -> None:
        # The store keeps a file's first before-image in a turn: undo restores the turn's start.
        if self.undo is None:
            return
        try:
            self.undo.record(self._turn_id, changes, self.ws)
        except OSError as exc:
            raise WriteFailed(
                f"could not save the undo snapshot ({exc.strerror or exc}); nothing was changed"
            ) from exc

    async def _call(self, action: CallTool) -> Outcome:
        """An external tool's call: the tool looked up, its arguments checked against its schema,
        then asked for as a command is (`Approvals.tool`), then made."""
        tools = await self._external_tools()
        tool = next((t for t in tools if t.name == action.name), None)
        if tool is None:
            names = ", ".join(["read_file", "list_files", "search_text", "edit_file", "create_file",
                               "run_command", *(t.name for t in tools)])  # fmt: skip
            return Outcome(f"There is no tool named {action.name!r}. The tools are: {names}.", False, True)
        assert self.external is not None
        if action.plain is not None:
            if (plain := plain_argument(tool, action.plain)) is None:
                form = f'CALL {tool.name} {{"argument": value, ...}}'
                return Outcome(
                    f"The arguments of CALL {tool.name} must be one line of JSON: {form}.", False, True
                )
            action = CallTool(tool.name, plain)
        if (problem := self.external.invalid(tool, action.arguments)) is not None:
            return Outcome(f"{tool.name} was not called: {problem}. Call it again with arguments that fit.",
                           ok=False, malformed=True)  # fmt: skip
        asked = shown_arguments(action.arguments)
        if tool.read_only and (seen := self._read_calls.get(f"{tool.name} {asked}")) is not None:
            # A small model calls a tool again with the same arguments instead of answering with
            # what it got: the same answer again, and told so; and the tool is taken off the next
            # request's list, since being told alone does not stop a model that sees it offered
            # (under a tool grammar it called it again every step to the turn's time limit).
            self._withdrawn.add(tool.name)
            again = f"You already called {tool.name} with these arguments in this turn. It gave:"
            return Outcome(f"{again}\n{seen}\nDo not call it again: answer with what it gave.", ok=True)
        fields = {"tool": tool.name, "arguments": action.arguments, "server": tool.source}
        decision = await self.approvals.tool(tool.name, asked, read_only=tool.read_only)
        if not decision.allowed:
            # Refused once, refused again: off the list for the turn, or a small model asks again
            # every step to the step limit.
            self._withdrawn.add(tool.name)
            self.emit.single("tool_call", **fields, output="", status="declined")
            return Outcome(f"Not called: {decision.reason}", ok=False)
        item = self.emit.start("tool_call", **fields, status="in_progress")
        try:
            result = await self.external.call(tool, action.arguments)
        except BaseException:
            self.emit.complete(item, status="failed", output="(interrupted)")
            raise
        text = self.secrets.redact(truncate(result.text, MAX_OUTPUT_CHARS))
        self.emit.complete(item, output=truncate(text, 2000), status="completed" if result.ok else "failed")
        if tool.read_only and result.ok:
            self._read_calls[f"{tool.name} {asked}"] = text
        return Outcome(f"{tool.name}:\n{text}", ok=result.ok)

    async def _command(self, command: str) -> Outcome:
        if "run_command" in self._withdrawn:  # refused twice already: not asked a third time
            self.emit.single(
                "command_execution", command=command, aggregated_output="", exit_code=None, status="declined"
            )
            return Outcome(WITHDRAWN_COMMANDS, ok=False)
        decision = await self.approvals.command(command)
        if not decision.allowed:
            self.emit.single(
                "command_execution", command=command, aggregated_output="", exit_code=None, status="declined"
            )
            # A small model whose command was refused tends to try another, then another, to the
            # step limit: after the second refusal in a turn it is no longer offered the tool (a
            # first refusal may be one command the user did not want, not commands as such).
            self._declined_commands += 1
            if self._declined_commands < 2:
                return Outcome(f"Not run: {decision.reason}", ok=False)
            self._withdrawn.add("run_command")
            return Outcome(f"Not run: {decision.reason}\n{WITHDRAWN_COMMANDS}", ok=False)
        item = self.emit.start(
            "command_execution", command=command, aggregated_output="", exit_code=None, status="in_progress"
        )
        try:
            result = await self.env.run(command, timeout_s=self.command_timeout_s)
        except BaseException:
            self.emit.complete(item, status="failed", aggregated_output="(interrupted)")
            raise
        self._read_calls.clear()  # a command may change files, as an edit does
        output = truncate(result.output, MAX_OUTPUT_CHARS)
        status = "completed" if result.ok else "failed"
        self.emit.complete(item, aggregated_output=output, exit_code=result.exit_code, status=status)
        if result.timed_out:
            note = f"Timed out after {self.command_timeout_s:g} s and was stopped."
        else:
            note = f"Exit code {result.exit_code}."
        return Outcome(f"$ {shown(command)}\n{output}\n{note}", ok=result.ok)


async def run_reported(
    emit: Emitter, cwd: Path, command: str, timeout_s: float, sandbox: SandboxOptions | None = None
) -> CommandResult:
    """Run a command the user gave (no approval asked: a heal's baseline tests, a swarm's final
    ones) in `cwd`, confined as `sandbox` says (default: the workspace only), reported as a
    `command_execution` item with the head and tail of its output."""
    item = emit.start("command_execution", command=command, aggregated_output="", exit_code=None,
                      status="in_progress")  # fmt: skip
    result = await environment_for(cwd, sandbox, timeout_s=timeout_s).run(command)
    emit.complete(
        item,
        aggregated_output=truncate(result.output, REPORTED_OUTPUT_CHARS),
        exit_code=result.exit_code,
        status="completed" if result.ok else "failed",
    )
    return result


# A comment standing for code left out: "# ...", "// rest of the code", "# (unchanged)".
_ELIDED = re.compile(
    r"^\s*(#|//|/\*)\s*(\.\.\.|…|.*\b(rest of|unchanged|existing code|same as before)\b)", re.I
)


def _check_rewrite(path: str, before: str, after: str) -> None:
    """Refuse a whole-file rewrite that is really a fragment: it would delete the rest of the file."""
    old, new = before.splitlines(), after.splitlines()
    elided = [line for line in new if _ELIDED.search(line) and line not in old]
    if elided:
        raise EditError(
            f"Your new {path} leaves code out ({elided[0].strip()!r}). Write the complete file, "
            "or change only some lines with a SEARCH/REPLACE block."
        )
    if len(old) >= 10 and len(new) < len(old) // 2:
        raise EditError(
            f"Your new {path} has {len(new)} lines but the file has {len(old)}: it would delete most of "
            "the file. Write the complete file, or change only some lines with a SEARCH/REPLACE block."
        )


def _kind(change: FileChange) -> str:
    if change.before is None:
        return "add"
    if change.after is None:
        return "delete"
    return "update"


def _protected_note(paths: list[str]) -> str:
    return (
        f"Left out the edit of {', '.join(paths)}: the test command runs it, so it decides "
        "whether the task is done."
    )


def _masked_note(reason: str) -> str:
    return (
        f"Not shown as it is: {reason}. Its values are masked ({MASK}); the names are as in the "
        "file, so use them by name (read them from the environment or the config at run time) "
        "and do not try to read the values another way.\n"
    )
