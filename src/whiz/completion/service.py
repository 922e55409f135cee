"""Running completions on the engine: one request at a time per client, stale ones cancelled.

An editor asks for a completion at every pause in typing. The answer to the previous keystroke is
worthless once the next one arrives, so a request from a client cancels that client's request in
flight (it then answers with no text, at once). Each client's requests share an engine session, so
the next keystroke's prompt lands in the slot that holds the last one (see `whiz.completion.fim`
for why only its last tokens differ).

What a client typed next is often what it was offered: the rest of the last completion, after
what was typed since, is the engine's prediction for this one. The engine verifies a prediction
in one batch and keeps what the model agrees with, so the output is the same, only sooner.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Literal

from whiz.chat.detok import Detokenizer
from whiz.chat.toolgrammar import literal
from whiz.completion.boundary import Boundary, Cursor
from whiz.completion.fim import FimBudget, FimInput, FimVocab, NoFim, build, plain_tokens
from whiz.engine.types import GenerateRequest, GenerationStats, LazyGrammar, SamplingParams
from whiz.errors import EngineError
from whiz.seams import Engine, Stream

StopType = Literal["eos", "limit", "word", "cancelled"]


@dataclass(frozen=True)
class CompletionOptions:
    """How the server runs completions."""

    budget: FimBudget = field(default_factory=FimBudget)
    default_max_tokens: int = 128
    """The output cap of a request that sets none (or -1, llama.cpp's "no limit")."""
    reuse_chunk_tokens: int = 64
    """After an edit above the cursor (lines deleted, an older file dropped from `input_extra`),
    cached runs of at least this many tokens that only moved are shifted into place instead of
    prefilled again (llama.cpp's `--cache-reuse`); 0 turns it off."""


@dataclass
class CompletionRequest:
    """One completion, whatever API asked for it."""

    fim: FimInput | None
    """The text around the cursor; None for a plain prompt continued as it is (`raw_prompt`)."""
    raw_prompt: str = ""
    max_tokens: int | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop: list[str] = field(default_factory=list)
    n_indent: int = 0
    t_max_predict_ms: float | None = None
    """Stop once this long has passed since the first token and a line is complete (llama.cpp's)."""
    client: str | None = None
    """Whose keystrokes these are: a newer request of the same client cancels this one."""
    tenant: str | None = None


@dataclass(frozen=True)
class LastCompletion:
    """What a client was last offered, for the next request's layout and prediction."""

    before: str
    text: str
    anchor_hint: str


MAX_CLIENTS_REMEMBERED = 64


@dataclass
class CompletionResult:
    text: str
    stop_type: StopType
    stopping_word: str
    stats: GenerationStats
    prompt_tokens: int
    output_tokens: int
    truncated: bool


class Completion:
    """One running completion: iterate `deltas()` for its text; `result` is set once they end."""

    def __init__(self, service: CompletionService, request: CompletionRequest):
        self._service = service
        self.request = request
        self.result: CompletionResult | None = None
        engine = service.engine
        max_tokens = request.max_tokens
        if max_tokens is None or max_tokens < 0:
            max_tokens = service.options.default_max_tokens
        self._healed = ""
        self._diverged = False
        self._boundary: Boundary | None = None
        self.truncated = False
        self.anchor_hint = ""
        prediction = None
        if request.fim is not None:
            vocab = service.vocab()
            budget = service.budget_for(max_tokens)
            last = service.last(request.client)
            hint = last.anchor_hint if last is not None else None
            prompt = build(vocab, engine.tokenizer, request.fim, budget, hint)
            tokens, self._healed, self.truncated = prompt.tokens, prompt.healed, prompt.truncated
            self.anchor_hint = prompt.anchor_hint
            cursor = Cursor.at(request.fim.before, request.fim.after)
            self._boundary = Boundary(cursor, n_indent=request.n_indent)
            if (guess := _rest_of(last, request.fim.before)) is not None:
                prediction = plain_tokens(engine.tokenizer, self._healed + guess + "\n")
        else:
            tokens = engine.tokenizer.encode(request.raw_prompt)
            if not tokens:
                tokens = engine.tokenizer.encode("\n")
        # A warm-up (no output) keeps out of the client's slot: it would replace the last prompt.
        session = f"complete:{request.client}" if request.client and max_tokens > 0 else None
        self.prompt_tokens = len(tokens)
        self._generate = GenerateRequest(
            prompt=tokens,
            max_tokens=max_tokens,
            sampling=request.sampling,
            session=session,
            tenant=request.tenant,
            reuse_chunk=service.options.reuse_chunk_tokens if request.fim is not None else 0,
            prediction=prediction,
            grammar=healing_grammar(self._healed),
        )
        self._stream: Stream | None = None
        self._stale = False

    def begin(self) -> None:
        """Queue it on the engine (raises ContextOverflow for a prompt over the window)."""
        self._stream = self._service.engine.generate(self._generate)

    def cancel(self) -> None:
        if self._stream is not None:
            self._stream.cancel()

    def make_stale(self) -> None:
        """A newer request of the same client replaces this one: stop now, answer with nothing."""
        self._stale = True
        self.cancel()

    async def deltas(self) -> AsyncIterator[str]:
        """The completion's text as it becomes certain; the last piece comes when it ends."""
        req, boundary = self.request, self._boundary
        assert self._stream is not None, "begin() first"
        detok = Detokenizer(self._service.engine.tokenizer, req.stop)
        raw, text, sent = "", "", 0
        stop_type: StopType | None = None
        n_out = 0
        t_first: float | None = None
        try:
            async for chunk in self._stream:
                t_first = t_first or time.perf_counter()
                n_out += len(chunk.tokens)
                for token in chunk.tokens:
                    raw += detok.feed(token)
                    if detok.stopped:
                        stop_type = "word"
                        break
                shaped = self._unheal(raw)
                if shaped is None:
                    continue
                text = shaped
                if self._diverged:
                    stop_type = "eos"
                elif boundary is not None and (end := boundary.end(text)) is not None:
                    text, stop_type = text[:end], stop_type or "eos"
                elif self._out_of_time(text, t_first):
                    # The complete lines (and any newline already sent: the answer is what was streamed).
                    text, stop_type = text[: max(text.rfind("\n"), sent)], "limit"
                if stop_type is not None:
                    # Answer now: waiting for the engine to see the cancel costs a decode step.
                    self._stream.cancel()
                    break
                ready = boundary.settled(text) if boundary is not None else len(text)
                if ready > sent and not self._stale:
                    yield text[sent:ready]
                    sent = ready
            if stop_type is None:
                raw += detok.flush()
                text = self._unheal(raw) or ""
                text = "" if self._diverged else text
        finally:
            self._stream.cancel()
            self._service.finished(self)
        stats = self._stream.stats
        if stats.finish_reason == "error" and sent == 0:
            raise EngineError(f"The completion failed: {stats.error or 'engine error'}")
        if self._stale:
            final, stop_type = "", "cancelled"
        else:
            final = boundary.shown(text) if boundary is not None else text
            if stop_type is None:
                stop_type = "limit" if stats.finish_reason == "length" else "eos"
            if final.startswith(text[:sent]) and len(final) > sent:
                yield final[sent:]
        offered = req.fim is not None and self._generate.max_tokens > 0 and not self._stale
        if offered and req.client is not None:
            self._service.remember(req.client, LastCompletion(req.fim.before, text, self.anchor_hint))
        self.result = CompletionResult(
            final if final.startswith(text[:sent]) else text[:sent],
            stop_type,
            req.stop[0] if stop_type == "word" and len(req.stop) == 1 else "",
            stats,
            self.prompt_tokens,
            n_out,
            self.truncated,
        )

    def _out_of_time(self, text: str, t_first: float) -> bool:
        """llama.cpp's `t_max_predict_ms`: past it, the first complete line is enough."""
        limit = self.request.t_max_predict_ms
        return limit is not None and "\n" in text and (time.perf_counter() - t_first) * 1000 > limit

    def _unheal(self, raw: str) -> str | None:
        """The output as it continues the text at the cursor: less the text the prompt left out
        (see `FimPrompt.healed`), or None while it is too short to tell. Where the model wrote
        other text than that, the completion would not fit what was typed: `_diverged` is set."""
        healed = self._healed
        if raw.startswith(healed):
            return raw[len(healed) :]
        if healed.startswith(raw):
            return None
        common = 0
        while raw[common] == healed[common]:
            common += 1
        if healed.strip():  # a word or symbol cut from the cursor's line, written otherwise
            self._diverged = True
            return ""
        return raw[common:]  # fewer spaces than were typed: what follows them


def healing_grammar(healed: str) -> LazyGrammar | None:
    """For a word or symbol run cut from the cursor's line (`FimPrompt.healed`): the output starts
    with that text, in any tokens (one may run past it: `(` is written as `(text`). The rule is
    the engine's "tagged" one, which lets the output go free once it is complete: after the token
    that finishes the cut text, nothing is matched. Spaces alone need no rule."""
    if not healed.strip():
        return None
    return LazyGrammar(f'tagged ::= {literal(healed)} ([^\\n] | "\\n")*\n', start="tagged")


def _rest_of(last: LastCompletion | None, before: str) -> str | None:
    """What of the last completion is still to type, where what was typed since agrees with it."""
    if last is None or not last.text or not before.startswith(last.before):
        return None
    typed = before[len(last.before) :]
    return last.text[len(typed) :] if last.text.startswith(typed) and len(last.text) > len(typed) else None


class CompletionService:
    """Completions on one engine, and the request in flight of each client."""

    def __init__(self, engine: Engine, options: CompletionOptions | None = None):
        self.engine = engine
        self.options = options or CompletionOptions()
        self.fim = FimVocab.of(engine.tokenizer)
        """The model's FIM tokens, None where it has none."""
        self._live: dict[str, Completion] = {}
        self._last: OrderedDict[str, LastCompletion] = OrderedDict()

    def last(self, client: str | None) -> LastCompletion | None:
        """The client's last finished completion at a cursor, if it is remembered."""
        return self._last.get(client) if client is not None else None

    def remember(self, client: str, last: LastCompletion) -> None:
        self._last[client] = last
        self._last.move_to_end(client)
        while len(self._last) > MAX_CLIENTS_REMEMBERED:
            self._last.popitem(last=False)

    def vocab(self) -> FimVocab:
        if self.fim is None:
            raise NoFim(
                f"The model '{self.engine.info.model}' has no fill-in-the-middle tokens "
                "(<|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>), so it cannot complete between a "
                "prefix and a suffix. Serve a model that has them (Qwen2.5-Coder does), or send "
                "only a prompt to /v1/completions.",
                param="suffix",
            )
        return self.fim

    def budget_for(self, max_tokens: int) -> FimBudget:
        """The budget, cut where it must so the prompt and the output fit the context window:
        the other files give way first, then the prefix and the suffix, 3 to 1."""
        b = self.options.budget
        room = max(self.engine.info.n_ctx - max_tokens - 256, 64)  # 256: the middle and the markers
        prefix = min(b.prefix_tokens, room * 3 // 4)
        suffix = min(b.suffix_tokens, room // 4)
        return replace(
            b,
            prefix_tokens=prefix,
            suffix_tokens=suffix,
            extra_tokens=max(0, min(b.extra_tokens, room - prefix - suffix)),
        )

    def prepare(self, request: CompletionRequest) -> Completion:
        """Build the prompt (raises a `WhizError` for a request that cannot run). It only tokenizes,
        so a large request may be prepared on a worker thread."""
        return Completion(self, request)

    def start(self, request: CompletionRequest) -> Completion:
        """`prepare` and `launch` in one."""
        return self.launch(self.prepare(request))

    def launch(self, completion: Completion) -> Completion:
        """Queue it on the engine; a completion that generates makes its client's one in flight
        stale. Raises ContextOverflow (nothing was sent yet) for a prompt over the window."""
        request = completion.request
        if request.client is not None and request.max_tokens != 0:
            old = self._live.get(request.client)
            if old is not None:
                old.make_stale()
            self._live[request.client] = completion
        try:
            completion.begin()
        except Exception:
            self.finished(completion)
            raise
        return completion

    def finished(self, completion: Completion) -> None:
        client = completion.request.client
        if client is not None and self._live.get(client) is completion:
            del self._live[client]
