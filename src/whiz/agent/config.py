"""How an agent behaves: one settings object, every field with the default `whiz exec` uses."""

from __future__ import annotations

from dataclasses import dataclass, field

from whiz.agent.approvals import ApprovalMode
from whiz.agent.context.instructions import INSTRUCTIONS_TOKENS
from whiz.agent.formats import ActionFormat
from whiz.agent.project.secret_files import SecretFiles
from whiz.environments.sandbox import SandboxOptions


@dataclass
class AgentConfig:
    """How one agent behaves. Every field has the default `whiz exec` uses."""

    actions: ActionFormat | None = None
    """text (edit blocks in the reply) or tools (function calls); None: text, or, for a session
    that is resumed, what it used."""
    approval: ApprovalMode = ApprovalMode.AUTO_EDIT
    max_steps: int = 12
    max_retries: int = 2
    """Malformed replies in a row that get feedback before the turn fails."""
    test_cmd: str | None = None
    """Run after edits; the turn is done when it passes. Also the one command pre-approved."""
    command_timeout_s: float = 120.0
    max_output_tokens: int = 2048
    """Per model call."""
    max_turn_output_tokens: int = 12_000
    """Output tokens a whole turn may use (a heal step counts every candidate's). A fast turn that
    passes writes a few hundred; a heal of 2 rounds of 5 about 3,000-5,000; this is
    room for that twice over, and a runaway stops here instead of at the step limit."""
    max_test_failures: int = 3
    """Edits a turn may see fail the tests before it stops (in auto mode: escalates). A fast turn
    that passes does so at its first test run, while turns whose edits keep failing go on to the
    step limit or the time limit (11 failing runs, three minutes)."""
    max_turn_s: float = 240.0
    """Seconds a whole turn may run. A passing task takes up to about 40 s (heal@5, every
    candidate finishing) and an exec's median is 9 s; six times the slowest passing task leaves
    room on a busy machine and ends a runaway (one ran 300 s)."""
    map_tokens: int = 1024
    instructions_tokens: int = INSTRUCTIONS_TOKENS
    """Budget for the project's AGENTS.md (or CLAUDE.md) files in the system prompt (0: none are
    read); longer files are cut, and the user told (`instructions.py`)."""
    context_tokens: int | None = None
    """The model's context window in tokens; None: as the server says (`/v1/models`). The agent
    compacts the conversation before a request that would not fit with room for the reply."""
    code_tokens: int = 2048
    """Budget (about 4 characters a token) for the code the task is about, attached to its first
    message beside the files it names: definitions it or a traceback names; a tiny repository whole."""
    check_edits: bool = True
    """After an edit, look at the files it wrote (`checks.py`: syntax errors, undefined names) and
    send what is wrong back to the model, once a turn, before the turn ends."""
    exact_renames: bool = True
    """A task that only renames a Python function or class ("rename say_hello to greet_person")
    is done on the code's tokens, every use at once, without asking the model, where its meaning
    is plain (`editing/rename.py`); the tests, if set, still run after it."""
    require_change: bool = True
    """A turn whose task asks for a change (not a question: `intent.asks_for_change`) and that
    ends with none has failed, saying so, instead of reporting "done" for nothing."""
    found_checks: bool = True
    """Run the checks the code already has for the function the task is about (its docstring's
    examples and doctests, a `__main__` block's asserts, the repository's tests of it:
    `project/found_checks.py`) in the sandbox, and let them choose among candidate edits and
    catch an edit that breaks them; with a test command, for a fix, beside it in the healing
    step's copies (`modes/found_turn.py`). Never in read-only."""
    cancel_grace_s: float = 2.0
    """How long a cancelled model call may take to end on its own before it is cut off."""
    sandbox: SandboxOptions = field(default_factory=SandboxOptions)
    """Where the commands it runs (`RUN`, the test command) may write and reach: by default the
    workspace only, `.git` read-only, no network, no secrets in the environment."""
    secrets: SecretFiles = field(default_factory=SecretFiles)
    """Which workspace files look like secrets (`.env`, keys, credentials, and the globs given
    with `--secret-file` or WHIZ_SECRET_FILES): the model sees one only where the user names it
    or approves its READ (docs/secrets.md), and the commands it runs only then too (or with
    `SandboxOptions.allow_secret_reads`). The session's `Workspace` is built with it, and the
    agent's sandbox hides by the same rules."""
