"""The director's plan: small, independent micro-tasks as validated JSON, and how to ask for one.

The director (deep mode) answers with a JSON object; `parse_plan` finds it in the reply,
validates it with pydantic, and checks every file stays inside the workspace. A bad plan
raises `PlanError`, whose message is written for the director to fix its plan.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from whiz.agent.context.repomap import repo_map
from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import Workspace

MAX_TASKS = 12


class PlanError(WhizAgentError):
    """The plan is not valid JSON of the right shape; the message says what to fix."""


class MicroTask(BaseModel):
    """One micro-task: what to do, the files it may change, and a command that passes when done."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,40}$")
    title: str = Field(min_length=1, max_length=200)
    instruction: str = Field(min_length=1, max_length=4000)
    files: list[str] = Field(min_length=1, max_length=10)
    check: str = Field(min_length=1, max_length=500)

    @field_validator("files")
    @classmethod
    def _plain_paths(cls, files: list[str]) -> list[str]:
        cleaned = [f.strip().removeprefix("./") for f in files]
        if any(not f for f in cleaned):
            raise ValueError("a file path is empty")
        return list(dict.fromkeys(cleaned))


class Plan(BaseModel):
    """The director's plan."""

    model_config = ConfigDict(extra="ignore")

    tasks: list[MicroTask] = Field(min_length=1, max_length=MAX_TASKS)

    @model_validator(mode="after")
    def _unique_ids(self) -> Plan:
        ids = [t.id for t in self.tasks]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"task ids must be unique; repeated: {', '.join(repeated)}")
        return self


_FENCED = re.compile(r"```(?:json)?\s*\n(.*?)```", re.S)


def parse_plan(text: str, ws: Workspace) -> Plan:
    """The plan in a reply (a fenced JSON block, or the first JSON object); raises `PlanError`."""
    candidates = [m.group(1) for m in _FENCED.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    if not candidates:
        raise PlanError("There is no JSON object in your reply. Reply with only the JSON plan.")
    error = ""
    for raw in candidates:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            error = f"The plan is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
            continue
        return validate_plan(data, ws)
    raise PlanError(error)


def validate_plan(data: object, ws: Workspace) -> Plan:
    """Validate decoded JSON as a plan for `ws`; raises `PlanError` naming each problem."""
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err["loc"]) or "the plan"
            problems.append(f"{where}: {err['msg']}")
        raise PlanError("The plan is not valid: " + "; ".join(problems) + ".") from None
    for task in plan.tasks:
        problem = check_problem(task.check, ws)
        if problem:
            raise PlanError(f"Task {task.id}: {problem}")
        for path in task.files:
            try:
                ws.resolve(path)
            except WhizAgentError as exc:  # a path outside the workspace
                raise PlanError(f"Task {task.id}: {exc.message}") from None
    return plan


SHELL_WORDS = frozenset({"cd", "test", "[", "true", "false", "exit", "export", "env", "sh", "bash", "!", "("})


def check_problem(check: str, ws: Workspace) -> str | None:
    """Why `check` cannot be a command here (its program does not exist), or None."""
    try:
        words = shlex.split(check)
    except ValueError as exc:
        return f"the check `{check}` is not a valid shell command ({exc})"
    words = [w for w in words if "=" not in w or w.startswith(("-", "/", "."))]  # skip VAR=value
    if not words:
        return f"the check `{check}` has no command in it"
    program = words[0]
    if program in SHELL_WORDS or shutil.which(program) or (ws.root / program).exists():
        return None
    return f"the check `{check}` runs `{program}`, which is not a command here; give a real command"


def load_plan(path: Path, ws: Workspace) -> Plan:
    """A plan from a JSON file (`whiz swarm --plan`); raises `PlanError`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"cannot read the plan {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    try:
        return validate_plan(data, ws)
    except PlanError as exc:
        raise PlanError(f"{path}: {exc.message}") from None


DIRECTOR_PROMPT = """\
You are the director of a team of fast coding assistants. Split the user's task into small,
independent micro-tasks that the assistants can do at the same time. Each assistant sees only
the task you give it and the files you list for it.
Rules:
- Each micro-task changes one file, or a few closely related files.
- No two micro-tasks change the same file.
- Each micro-task has a check: a real shell command that exits with 0 once that micro-task alone
  is done. Use the project's own test files where there are some, e.g. `python3 test_shapes.py`
  or `python3 -m pytest tests/test_shapes.py -q`.
- Write each instruction so that it can be done without seeing the other micro-tasks.
Reply with only a JSON object, and nothing else. For example, for "rename area to surface in
shapes.py and add a docstring to main in app.py":
"""
_EXAMPLE = [
    {
        "id": "t1",
        "title": "Rename area",
        "instruction": "In shapes.py, rename the function area to surface and update its uses in shapes.py.",
        "files": ["shapes.py"],
        "check": "python3 test_shapes.py",
    },
    {
        "id": "t2",
        "title": "Docstring for main",
        "instruction": "In app.py, add a one-line docstring to the function main.",
        "files": ["app.py"],
        "check": "python3 -c 'import app'",
    },
]
DIRECTOR_PROMPT += '{"tasks": [\n' + ",\n".join(json.dumps(t) for t in _EXAMPLE) + "\n]}"


def director_messages(
    ws: Workspace, task: str, test_cmd: str | None, map_tokens: int = 1536
) -> tuple[str, str]:
    """(instructions, first user message) for the director."""
    parts = [DIRECTOR_PROMPT]
    tree = repo_map(ws, budget_tokens=map_tokens)
    if tree.strip():
        parts.append("The repository:\n" + tree.rstrip())
    user = f"Task: {task}"
    if test_cmd:
        user += f"\nWhen all micro-tasks are done, `{test_cmd}` must pass."
    return "\n\n".join(parts), user
