"""`POST /v1/responses/compact`: a long conversation made into a short input window.

The window keeps every user and system message as it was, drops what the model said and did
(assistant messages, tool calls and their results, reasoning, earlier compaction items) and ends
with one `compaction` item: the model's own summary of the whole conversation. The client starts
its next response from that window (with no `previous_response_id`) and appends its new items;
whiz reads the compaction item back as the assistant's summary (`protocol.SUMMARY_HEADER`).

The summary is one turn on the same backend as every other request, so it works the same for
whiz's own model and behind the gateway. A conversation too long for the context window loses its
oldest messages from the summarizer's view, as `truncation: "auto"` does, rather than failing: a
client compacts exactly when its conversation has grown too long.
"""

from __future__ import annotations

from whiz.backend.types import TurnRequest
from whiz.chat.messages import Message
from whiz.engine.types import GenerationStats
from whiz.errors import EngineError, InvalidRequest
from whiz.seams import Backend
from whiz.server.protocol import CompactRequest, TurnDefaults
from whiz.server.responses import Conversation, start_truncating, usage
from whiz.server.shapes import compact_resource, compaction_item, message_item

SUMMARIZER = (
    "You compact a conversation between a user and an assistant so that it can go on without "
    "its full history. Write a summary the assistant can continue from: the user's goal, what "
    "was decided, what was done and found (files, commands, tool results that matter), what is "
    "still open, and any names, numbers or code words the user gave. Be concise and exact; write "
    "only the summary."
)
ASK = "Write the summary of the conversation above now."
SUMMARY_MAX_TOKENS = 1024
"""The summary's length cap: a window that stays short even for a long conversation."""
KEPT_ROLES = ("user", "system")


class CompactionService:
    """Compacts conversations with one summarizing turn on `backend`."""

    def __init__(self, backend: Backend, defaults: TurnDefaults):
        self.backend = backend
        self.defaults = defaults

    async def compact(
        self,
        req: CompactRequest,
        previous: Conversation | None,
        *,
        session: str | None = None,
        tenant: str | None = None,
    ) -> dict:
        """The compacted window of `previous` (a stored response's conversation) and `req.input`."""
        messages = (previous.messages if previous else []) + req.input_messages()
        if not messages:
            raise InvalidRequest("There is nothing to compact: input holds no items.", param="input")
        summary, stats, output_tokens = await self._summarize(req, messages, session, tenant)
        kept = [message_item(m.role, m.content) for m in messages if m.role in KEPT_ROLES]
        return compact_resource(output=[*kept, compaction_item(summary)], usage=usage(stats, output_tokens))

    async def _summarize(
        self, req: CompactRequest, messages: list[Message], session: str | None, tenant: str | None
    ) -> tuple[str, GenerationStats, int]:
        system = SUMMARIZER
        if req.instructions:
            system += (
                f"\n\nThe assistant in the conversation worked under these instructions:\n{req.instructions}"
            )
        request = TurnRequest(
            system,
            [*messages, Message("user", ASK)],
            max_tokens=SUMMARY_MAX_TOKENS,
            sampling=self.defaults.sampling,
            session=session,
            cache_key=req.prompt_cache_key,
            tenant=tenant,
        )
        live, _ = start_truncating(self.backend, request)
        async for _ in live.events():
            pass  # the summary is read whole from the result
        result = live.result
        assert result is not None
        if result.finish_reason in ("error", "cancelled"):
            raise EngineError(result.stats.error or "The summary of the conversation could not be written.")
        return result.text.strip(), result.stats, result.output_tokens
