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

from whiz.agent.actions import ParseError, parse_edits
from whiz.agent.edits import Edit
from whiz.server.protocol import ResponsesRequest
from whiz.server.responses import ResponsesService

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
    """The model's answer to an edit request: its reply text, the edits in it, and the finished response."""

    reply: str
    edits: list[Edit]
    response: dict
    """The Responses object (status, usage, and the `whiz` timings with a timeline)."""
    parse_error: str | None = None
    """Why the reply's edit blocks could not be read, when they could not."""


class EditProposer(Protocol):
    """Something that can propose edits to a file: the one-request proposer here, later the agent."""

    async def propose(self, path: str, content: str, instruction: str, model: str | None) -> Proposal: ...


def edit_request(path: str, content: str, instruction: str, model: str | None) -> ResponsesRequest:
    """The Responses request that asks for `instruction` to be done to `path`."""
    whole = len(content) <= WHOLE_FILE_MAX_CHARS
    fence = "````" if "```" in content else "```"
    body = content if content.endswith("\n") or not content else content + "\n"
    return ResponsesRequest(
        model=model,
        instructions=WHOLE_FILE_RULES if whole else SEARCH_REPLACE_RULES.format(path=path),
        input=f"{path}\n{fence}\n{body}{fence}\n\nTask: {instruction}",
        temperature=0,
        max_output_tokens=None,  # set by ModelEditProposer from the file's length in tokens
        prediction={"type": "content", "content": content} if whole else None,
        whiz={"timeline": True},
    )


class ModelEditProposer:
    """Proposes edits with one model turn on this server's engine (no network, no agent)."""

    def __init__(self, responses: ResponsesService):
        self.responses = responses

    async def propose(self, path: str, content: str, instruction: str, model: str | None) -> Proposal:
        req = edit_request(path, content, instruction, model)
        # Room for the whole file, rewritten a little longer, and the path line around it.
        file_tokens = self.responses.backend.count_tokens(content)
        req.max_output_tokens = 2 * file_tokens + 256
        run = self.responses.start(self.responses.prepare(req, None, session=None))
        async for _ in run.events():
            pass
        response = run.response or {}
        reply = "".join(
            part.get("text", "")
            for item in response.get("output", [])
            if item.get("type") == "message"
            for part in item.get("content", [])
        )
        try:
            edits = parse_edits(reply, whole_files=True)
        except ParseError as exc:
            return Proposal(reply, [], response, parse_error=exc.message)
        return Proposal(reply, edits, response)
