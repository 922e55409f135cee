"""One model turn, as every API runs it: prompt tokens in; text deltas, tool calls and a result out.

The APIs differ only in how they frame these pieces on the wire. Leaving the iterator early
(a client that went away, a cancel) cancels the engine stream, so the engine stops within a step.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from whiz.backend.types import TextDelta
from whiz.chat.detok import Detokenizer
from whiz.chat.messages import Message, ToolCall
from whiz.chat.template import assistant_body
from whiz.chat.toolcalls import TextPart, ToolCallParser
from whiz.engine.types import GenerateRequest, GenerationStats, LazyGrammar, SamplingParams
from whiz.seams import Engine, Stream


@dataclass
class TurnSpec:
    prompt: list[int]
    max_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop: Sequence[str] = ()
    parse_tools: bool = False
    tool_names: tuple[str, ...] = ()
    """The offered tools' names: a reply that is only a JSON call to one of them is read as a call."""
    session: str | None = None
    prediction: list[int] | None = None
    speculation: bool = True
    tenant: str | None = None
    grammar: LazyGrammar | None = None
    """The offered tools' call grammar, where calls are constrained."""
    notes: dict[str, str] = field(default_factory=dict)
    """What was changed about the request before it ran (see `GenerationStats.notes`)."""

    def request(self) -> GenerateRequest:
        """What the engine is asked to generate."""
        return GenerateRequest(
            prompt=self.prompt,
            max_tokens=self.max_tokens,
            sampling=self.sampling,
            session=self.session,
            prediction=self.prediction,
            speculation=self.speculation,
            tenant=self.tenant,
            grammar=self.grammar,
        )


@dataclass
class DecodedResult:
    text: str
    tool_calls: list[ToolCall]
    output_tokens: list[int]
    stats: GenerationStats
    finish_reason: str

    steps: list[tuple[float, int]] = field(default_factory=list)
    """(ms since the turn started, tokens) for each decode step, as the chunks arrived."""

    def message(self) -> Message:
        content = self.text.strip() if self.tool_calls else self.text
        return Message("assistant", content, tuple(self.tool_calls))

    @property
    def body(self) -> str:
        return assistant_body(self.message())


__all__ = ["TextDelta", "DecodedTurn", "DecodedResult", "TurnSpec"]


class DecodedTurn:
    """A running turn on an engine. Iterate `events()`; call `cancel()` from anywhere to stop it.

    `stream` is an engine stream already started for this spec (one candidate of several);
    without it the turn starts its own.
    """

    def __init__(self, engine: Engine, spec: TurnSpec, stream: Stream | None = None):
        self.spec = spec
        self._engine = engine
        self._t0 = time.perf_counter()
        self.stream: Stream = stream if stream is not None else engine.generate(spec.request())
        self.stream.stats.notes.update(spec.notes)
        self.result: DecodedResult | None = None

    def cancel(self) -> None:
        self.stream.cancel()

    async def events(self) -> AsyncIterator[TextDelta | ToolCall]:
        detok = Detokenizer(self._engine.tokenizer, self.spec.stop)
        parser = ToolCallParser(enabled=self.spec.parse_tools, names=self.spec.tool_names)
        tokens: list[int] = []
        text_parts: list[str] = []
        calls: list[ToolCall] = []
        steps: list[tuple[float, int]] = []
        stopped_by_string = False

        def route(pieces):
            for piece in pieces:
                if isinstance(piece, TextPart):
                    text_parts.append(piece.text)
                    yield TextDelta(piece.text)
                else:
                    calls.append(piece)
                    yield piece

        try:
            async for chunk in self.stream:
                if stopped_by_string:
                    continue  # drain what the engine made before it saw the cancel
                steps.append(((time.perf_counter() - self._t0) * 1000, len(chunk.tokens)))
                for token in chunk.tokens:
                    tokens.append(token)
                    for ev in route(parser.feed(detok.feed(token))):
                        yield ev
                    if detok.stopped:
                        stopped_by_string = True
                        self.stream.cancel()
                        break
            for ev in route(parser.feed(detok.flush())):
                yield ev
            for ev in route(parser.finish()):
                yield ev
        finally:
            # Runs on normal end, on error, and when the consumer goes away mid-stream.
            self.stream.cancel()
        stats = self.stream.stats
        reason = "stop" if stopped_by_string else (stats.finish_reason or "stop")
        self.result = DecodedResult("".join(text_parts), calls, tokens, stats, reason, steps)
