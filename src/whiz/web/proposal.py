"""Asking the model for an edit to one file, in-process, for the web app's "Ask for an edit".

One request, no agent loop: the file and the instruction go to the model, and the reply's edits
are read with `parse_edits`. Small files are rewritten whole, with the current file as the
Predicted Output, so the unchanged lines are verified in batches instead of decoded one by one;
the default 0.5B model follows this format far more often than SEARCH/REPLACE blocks (measured on
a handful of single-file tasks: 4 of 5 replies usable against 0 of 5). Larger files ask for
SEARCH/REPLACE blocks, which stay short however long the file is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from whiz.agent.editing.actions import ParseError, parse_edits
from whiz.agent.editing.edits import Edit
from whiz.backend.types import TurnRequest
from whiz.chat.messages import Message
from whiz.engine.types import SamplingParams
from whiz.errors import WhizError
from whiz.seams import Backend
from whiz.server.responses import timeline, timings, usage

WHOLE_FILE_MAX_CHARS = 12_000
"""Files up to this size are rewritten whole; larger ones get SEARCH/REPLACE blocks."""

WHOLE_FILE_RULES = (
    "You are a code editor. You rewrite the file the user gives you so that it does the task. "
    "Answer with the file's path on its own line, then the complete updated file in one fenced code "
    "block. Keep every line the task does not change exactly as it is. Write nothing else."
)
SEARCH_REPLACE_RULES = (
    "You are a code editor. You change the file the user gives you so that it does the task. "
    "Answer with SEARCH/REPLACE blocks only, one per change:\n\n"
    "{path}\n<<<<<<< SEARCH\nlines copied exactly from the file\n=======\nthe new lines\n>>>>>>> REPLACE"
)


@dataclass
class Proposal:
    """The model's answer to an edit request: its reply text, the edits in it, and how it went."""

    reply: str
    edits: list[Edit]
    response: dict
    """status ("completed", "incomplete" when cut at its token limit, or "failed" with an `error`),
    `usage` and the `whiz` timings with a timeline, as a response's own fields say them."""
    parse_error: str | None = None
    """Why the reply's edit blocks could not be read, when they could not."""


class EditProposer(Protocol):
    """Something that can propose edits to a file: the one-request proposer here, later the agent."""

    async def propose(self, path: str, content: str, instruction: str, model: str | None) -> Proposal: ...


def edit_turn(path: str, content: str, instruction: str, max_tokens: int) -> TurnRequest:
    """The turn that asks for `instruction` to be done to `path`: small files are rewritten whole,
    with the current file as the prediction; larger ones get SEARCH/REPLACE blocks."""
    whole = len(content) <= WHOLE_FILE_MAX_CHARS
    fence = "````" if "```" in content else "```"
    body = content if content.endswith("\n") or not content else content + "\n"
    return TurnRequest(
        WHOLE_FILE_RULES if whole else SEARCH_REPLACE_RULES.format(path=path),
        [Message("user", f"{path}\n{fence}\n{body}{fence}\n\nTask: {instruction}")],
        max_tokens=max_tokens,
        sampling=SamplingParams(temperature=0),
        prediction=content if whole else None,
    )


class ModelEditProposer:
    """Proposes edits with one model turn on this server's backend, called in-process (no
    network, no agent, no wire format in between)."""

    def __init__(self, backend: Backend):
        self.backend = backend

    async def propose(self, path: str, content: str, instruction: str, model: str | None) -> Proposal:
        # Room for the whole file, rewritten a little longer, and the path line around it.
        max_tokens = 2 * self.backend.count_tokens(content) + 256
        turn = self.backend.start(edit_turn(path, content, instruction, max_tokens))
        try:
            async for _ in turn.events():
                pass
        except WhizError as exc:
            return Proposal("", [], {"status": "failed", "error": {"message": exc.message}})
        finally:
            turn.cancel()
        result = turn.result
        assert result is not None
        response = {
            "status": "incomplete" if result.finish_reason == "length" else "completed",
            "usage": usage(result.stats, result.output_tokens),
            "whiz": timings(result.stats) | {"timeline": timeline(result.steps)},
        }
        try:
            edits = parse_edits(result.text, whole_files=True)
        except ParseError as exc:
            return Proposal(result.text, [], response, parse_error=exc.message)
        return Proposal(result.text, edits, response)
