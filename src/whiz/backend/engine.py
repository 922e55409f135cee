"""The embedded backend: the chat template renders messages to tokens, the engine runs them.

A conversation's state here is its exact token ids. A follow-up that resumes it appends only the
new messages' tokens, so the engine finds everything before them in its KV cache; the sampled
tokens of every reply are remembered, so a client that resends a reply as text hits the cache too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from whiz.backend.turns import DecodedTurn, TurnSpec
from whiz.backend.types import BackendInfo, TextDelta, TurnRequest, TurnResult
from whiz.chat.messages import Message, ToolCall
from whiz.chat.template import ASSISTANT_START, ChatTemplate
from whiz.chat.toolgrammar import request_grammar
from whiz.errors import ContextOverflow, EngineError, InvalidRequest
from whiz.seams import Engine, Stream, Tokenizer

CLOSE_TURN = "<|im_end|>\n"

PREDICTION_CHARS_PER_TOKEN = 16
"""A prediction is cut to this many characters per token of the context window before it is
tokenized (code averages 3 to 4): tokenizing megabytes only to cut them would cost seconds."""


def prediction_tokens(
    tokenizer: Tokenizer, text: str | None, limit: int
) -> tuple[list[int] | None, str | None]:
    """A prediction's tokens, at most `limit` (the context window: an output cannot repeat more),
    and a note for the reply when it was cut. A prediction only speeds the output up, never
    changes it, so a long one is cut, not refused."""
    if not text:
        return None, None
    tokens = tokenizer.encode(text[: limit * PREDICTION_CHARS_PER_TOKEN])
    if len(tokens) <= limit and len(text) <= limit * PREDICTION_CHARS_PER_TOKEN:
        return tokens, None
    return tokens[:limit], f"cut to its first {min(len(tokens), limit)} tokens (the context window)"


class EngineBackend:
    """A `Backend` over one in-process `Engine`."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.template = ChatTemplate(engine.tokenizer)
        self.info = BackendInfo(
            model=engine.info.model, n_ctx=engine.info.n_ctx, max_candidates=engine.info.n_seq_max
        )

    def start(self, request: TurnRequest) -> EngineTurn:
        """Render the prompt and check it fits; the engine starts on `open()`."""
        enc = self.template
        basis = self._basis(request)
        if request.continue_last:
            # The reply goes on from the last message: its turn is opened, not closed, and no new
            # one begins. The start of the reply is tokenized as a reply's body is.
            start = request.messages[-1].content
            prompt = basis = basis + enc.tokenizer.encode(ASSISTANT_START) + enc.tokenizer.encode(start)
        else:
            prompt = basis + enc.tokenizer.encode(ASSISTANT_START) if request.generate else basis
        limit = self.engine.info.n_ctx
        if len(prompt) >= limit:
            raise ContextOverflow(len(prompt), limit, param=request.input_param)
        prediction, cut = prediction_tokens(enc.tokenizer, request.prediction, limit)
        spec = TurnSpec(
            prompt,
            (request.max_tokens or limit) if request.generate else 0,
            request.sampling,
            stop=request.stop,
            parse_tools=bool(request.tools),
            tool_names=tuple(t.name for t in request.tools),
            session=request.session or request.cache_key,
            prediction=prediction,
            speculation=request.speculation,
            tenant=request.tenant,
            grammar=request_grammar(request.tools, request.tool_choice)
            if request.tools and request.tool_grammar
            else None,
            notes={"prediction": cut} if cut else {},
        )
        return EngineTurn(self, spec, basis, generate=request.generate)

    def _basis(self, request: TurnRequest) -> list[int]:
        """The conversation's tokens before the reply (with a continued reply, before its start)."""
        enc = self.template
        messages = request.messages[:-1] if request.continue_last else request.messages
        if request.resume is not None and request.resume.n_messages <= len(messages):
            done = request.resume.n_messages
            return list(request.resume.state) + enc.encode_turns(messages[done:], tenant=request.tenant)
        head = [Message("system", request.system)] if request.system is not None else []
        return enc.encode(head + messages, request.tools, add_generation_prompt=False, tenant=request.tenant)

    def start_many(self, request: TurnRequest, n: int) -> list[EngineTurn]:
        """`n` candidates: one prompt, prefilled once, decoded together (`Engine.generate_many`)."""
        limit = self.engine.info.n_seq_max
        if n > limit:
            raise InvalidRequest(
                f"n is {n}, but this server decodes at most {limit} candidates at once (its --slots).",
                param="n",
            )
        first = self.start(request)
        if n == 1:
            return [first]
        streams: list[Stream] = []

        def take(i: int) -> Stream:
            if not streams:  # the first candidate to open starts them all
                streams.extend(self.engine.generate_many(first.spec.request(), n))
            return streams[i]

        return [
            EngineTurn(self, first.spec, first.basis, generate=request.generate, stream=lambda i=i: take(i))
            for i in range(n)
        ]

    def count_tokens(self, text: str) -> int:
        return len(self.engine.tokenizer.encode(text))

    def status(self) -> dict[str, float]:
        status = self.engine.status() if hasattr(self.engine, "status") else {}
        return {f"engine_{k}": v for k, v in status.items()}


class EngineTurn:
    """One turn on the engine (a `BackendTurn`)."""

    def __init__(
        self,
        backend: EngineBackend,
        spec: TurnSpec,
        basis: list[int],
        *,
        generate: bool,
        stream: Callable[[], Stream] | None = None,
    ):
        self.spec = spec
        self.basis = basis
        self.prompt_tokens = len(spec.prompt)
        self.result: TurnResult | None = None
        self._backend = backend
        self._generate = generate
        self._live: DecodedTurn | None = None
        self._cancelled = False
        self._stream = stream
        """Where a candidate of several gets its engine stream (they start together)."""

    async def open(self) -> None:
        if self._live is None:
            stream = self._stream() if self._stream is not None else None
            self._live = DecodedTurn(self._backend.engine, self.spec, stream)
            if self._cancelled:
                self._live.cancel()

    def cancel(self) -> None:
        self._cancelled = True
        if self._live is not None:
            self._live.cancel()

    def progress(self) -> dict[str, int] | None:
        if self._live is None:
            return None
        stats = self._live.stream.stats
        processed = stats.cached_tokens + stats.prefilled_tokens
        return {"total": self.prompt_tokens, "cache": stats.cached_tokens, "processed": processed}

    async def events(self) -> AsyncIterator[TextDelta | ToolCall]:
        await self.open()
        assert self._live is not None
        async for piece in self._live.events():
            yield piece
        done = self._live.result
        assert done is not None
        if done.finish_reason == "error":
            # The engine ended this request (a grammar past its deadline, a full cache): every API
            # reports it as the error it is, never as a reply that merely stopped early.
            raise EngineError(done.stats.error or "generation failed")
        if self._generate:
            # Close the assistant turn so the state is exactly what a follow-up continues.
            self._backend.template.remember(done.body, done.output_tokens, self.spec.tenant)
            closing = self._backend.engine.tokenizer.encode(CLOSE_TURN)
            state = self.spec.prompt + done.output_tokens + closing
        else:
            state = self.basis
        self.result = TurnResult(
            done.text,
            done.tool_calls,
            done.stats,
            done.finish_reason,
            len(done.output_tokens),
            state,
            done.steps,
        )
