"""N candidate replies to one conversation, for healing: the `CandidateSource` seam and its adapters.

A source streams its candidates: `async with source.stream(...) as found`, then `async for
candidate in found` yields each candidate as it finishes, in the order they finish, so that its
tests can run while the others are still being written. Leaving the block early cancels the
candidates still being decoded (healing stops a round once one passes); `found.generation()`
then says what was written, and how long it took. `generate()` waits for them all.

`ChatCandidates` asks an OpenAI-compatible server (over HTTP, or a server's own chat service in
the same process: anything with `ChatPoster.stream`). In parallel (the default) it sends one
streamed request with `n=N`: whiz decodes the N candidates as N sequences in one engine,
prefilling the prompt once and sharing its KV cache, and a closed stream stops them within a
step. A server that ignores or refuses `n` gets the missing candidates as concurrent single
requests instead (still batched together by a whiz engine, but each prefills the prompt).
`parallel=False` decodes them one after another, which is what the parallel path is measured
against. Candidate i is sampled with seed + i either way, so the two paths produce the same
candidates from a batch-invariant engine.

`ScriptedCandidates` replays fixed texts for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from whiz.agent.context.repomap import len_based_estimate
from whiz.agent.repetition import looping
from whiz.client import ResponseError

Method = Literal["n", "concurrent", "sequential", "scripted", "mutants", "forced"]


@dataclass
class Generation:
    """What one call produced: the candidates' texts and output tokens, and how long it took."""

    texts: list[str]
    output_tokens: list[int]
    wall_ms: float
    method: Method
    """How the candidates were decoded: one request with n, concurrent requests, or one by one."""
    prompt_tokens: int = 0
    finish_reasons: list[str] = field(default_factory=list)
    """Per candidate; "cancelled" for one stopped before it finished."""


@dataclass(frozen=True)
class Candidate:
    """One finished candidate."""

    index: int
    text: str
    output_tokens: int
    finish_reason: str


_END = object()


class CandidateStream:
    """One call's candidates, each yielded as it finishes. A producer (the source's decoding, run
    as a task from `__aenter__`) writes text with `write` and ends each candidate with `finish`;
    leaving the `async with` block cancels the producer, and with it what is still decoding."""

    def __init__(self, n: int, produce: Callable[[CandidateStream], Awaitable[None]], method: Method):
        self.n = n
        self.method = method
        self.prompt_tokens = 0
        self.texts = [""] * n
        self._tokens: list[int | None] = [None] * n
        self._reasons: list[str | None] = [None] * n
        self._produce = produce
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._started = self._ended = 0.0

    async def __aenter__(self) -> CandidateStream:
        self._started = time.perf_counter()
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if not self._ended:
            self._ended = time.perf_counter()

    async def _run(self) -> None:
        try:
            await self._produce(self)
        except Exception as exc:  # handed to the reader, who raises it
            self._queue.put_nowait(exc)
        finally:
            self._queue.put_nowait(_END)

    def __aiter__(self) -> AsyncIterator[Candidate]:
        return self._read()

    async def _read(self) -> AsyncIterator[Candidate]:
        while (item := await self._queue.get()) is not _END:
            if isinstance(item, Exception):
                raise item
            yield item

    def write(self, index: int, text: str) -> None:
        """More text of candidate `index`. A candidate caught in a loop (`repetition.py`) ends
        there, without its loop; what its decoding writes after that is dropped."""
        if self._reasons[index] is not None:
            return
        self.texts[index] += text
        if (cut := looping(self.texts[index], text)) is not None:
            self.texts[index] = self.texts[index][:cut]
            self.finish(index, "loop")

    def reason(self, index: int) -> str | None:
        """Why candidate `index` ended ("loop": caught in one), or None while it goes on."""
        return self._reasons[index]

    def finish(self, index: int, reason: str, output_tokens: int | None = None) -> None:
        """Candidate `index` is complete (a second finish of the same index is ignored)."""
        if self._reasons[index] is not None:
            return
        tokens = output_tokens or max(1, len_based_estimate(self.texts[index]))
        self._tokens[index], self._reasons[index] = tokens, reason
        self._queue.put_nowait(Candidate(index, self.texts[index], tokens, reason))
        if all(r is not None for r in self._reasons):
            self._ended = time.perf_counter()

    def generation(self) -> Generation:
        """Everything written so far; a candidate not finished counts as cancelled."""
        end = self._ended or time.perf_counter()
        tokens = [
            t if t is not None else len_based_estimate(x)
            for t, x in zip(self._tokens, self.texts, strict=True)
        ]
        reasons = [r or "cancelled" for r in self._reasons]
        return Generation(
            list(self.texts), tokens, (end - self._started) * 1000, self.method, self.prompt_tokens, reasons
        )


@dataclass(frozen=True)
class Draw:
    """How a round's candidates are sampled."""

    n: int
    temperature: float
    max_tokens: int
    seed: int | None = None
    """Candidate i samples with seed + i; None for fresh randomness."""
    parallel: bool = True
    """Decode the n together (one request with n); False: one after another, to compare."""
    greedy_first: bool = False
    """Candidate 0 is the model's most likely reply (temperature 0), the others sampled: the one
    reply most likely to be right, and, one after another, the first to be tested."""
    prediction: str | None = None
    """The text the replies are expected to resemble (a function's current source, for a rewrite
    of it): sent as the request's prediction, so the server's exact speculative decoding accepts
    the unchanged parts in batches. It changes only how fast the replies come, never what they say."""
    start: str | None = None
    """The start of every reply, written for the model: each goes on from it (Chat Completions'
    `continue_final_message`), and each candidate's text is the start and what followed it. Only
    for a source that `continues` (None there: not known yet)."""


class CandidateSource(Protocol):
    """Produces `n` sampled replies to a chat conversation, each as it finishes. A source may say
    whether it can go on from a reply's start (`Draw.start`) as a `continues` attribute: True, False,
    or None (not known until it tried); one without the attribute is not asked to."""

    def stream(self, messages: list[dict[str, Any]], draw: Draw) -> CandidateStream: ...


async def generate(source: CandidateSource, messages: list[dict[str, Any]], draw: Draw) -> Generation:
    """All `draw.n` candidates, once every one has finished."""
    async with source.stream(messages, draw) as found:
        async for _ in found:
            pass
    return found.generation()


async def relay(out: CandidateStream, stream: CandidateStream, indexes: Sequence[int]) -> None:
    """`stream`'s candidates written into `out` as they finish, its candidate i as `out`'s
    `indexes[i]` (any beyond those are dropped), and its prompt tokens added."""
    async with stream as found:
        async for candidate in found:
            if candidate.index >= len(indexes):
                continue
            at = indexes[candidate.index]
            out.write(at, candidate.text)
            out.finish(at, candidate.finish_reason, candidate.output_tokens)
        out.prompt_tokens += found.prompt_tokens


class ChatPoster(Protocol):
    """Streams a chat request to an OpenAI-compatible path, yielding each chunk; an error answer
    raises `ResponseError`. `HttpClient` is one; the web app's heal uses its own server's chat
    service."""

    def stream(self, path: str, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]: ...


class ChatCandidates:
    """Candidates from a streamed `POST /v1/chat/completions` on `http` (not closed here)."""

    def __init__(self, http: ChatPoster, model: str | None = None):
        self.http = http
        self.model = model
        self.supports_n: bool | None = None
        """Learned on the first parallel call: whether the server returned n choices for n."""
        self.continues: bool | None = None
        """Learned on the first draw with a start (`Draw.start`): whether the server said it went
        on from it ("continued" in its reply's `whiz` object); one that does not say may have
        answered afresh."""

    def stream(self, messages: list[dict[str, Any]], draw: Draw) -> CandidateStream:
        n, seed = draw.n, draw.seed
        request: dict[str, Any] = {
            "messages": messages,
            "temperature": draw.temperature,
            "max_tokens": draw.max_tokens,
            "stream_options": {"include_usage": True},
        }
        if self.model:
            request["model"] = self.model
        if draw.prediction:
            request["prediction"] = {"type": "content", "content": draw.prediction}
        if draw.start:
            request["messages"] = [*messages, {"role": "assistant", "content": draw.start}]
            request["continue_final_message"] = True

        async def ask(out: CandidateStream, count: int, first: int) -> int:
            """`count` candidates in one request, the first sampled with seed + `first`; returns
            how many choices the server wrote."""
            body = {**request, "n": count} if count > 1 else dict(request)
            if seed is not None:
                body["seed"] = seed + first
            if draw.greedy_first and first == 0 and count == 1:
                body["temperature"] = 0.0
            seen: set[int] = set()
            ours = range(first, min(first + count, out.n))
            chunks = self.http.stream("/chat/completions", body)
            async for chunk in chunks:
                if "error" in chunk:
                    raise ResponseError.from_error(chunk["error"])
                usage = chunk.get("usage") or {}
                out.prompt_tokens = max(out.prompt_tokens, usage.get("prompt_tokens") or 0)
                for choice in chunk.get("choices") or []:
                    index = first + (choice.get("index") or 0)
                    if index >= out.n:
                        continue
                    if index not in seen and draw.start:
                        out.write(index, draw.start)
                    seen.add(index)
                    out.write(index, (choice.get("delta") or {}).get("content") or "")
                    if reason := choice.get("finish_reason"):
                        said = chunk.get("whiz") or {}
                        if draw.start:
                            self.continues = bool(said.get("continued"))
                        out.finish(index, reason, said.get("decode_tokens"))
                reasons = [out.reason(i) for i in ours]
                if "loop" in reasons and None not in reasons:
                    # Every candidate of this request ended, one in a loop: closing the stream
                    # stops the server decoding the rest of the loop to the token limit.
                    if close := getattr(chunks, "aclose", None):
                        await close()
                    break
            for index in seen:  # a stream that ended without a finish_reason still ended
                out.finish(index, "stop")
            return len(seen)

        async def produce(out: CandidateStream) -> None:
            if not draw.parallel:
                for i in range(n):
                    await ask(out, 1, i)
                return
            if draw.greedy_first and n > 1:
                # The greedy one alone, beside one request for the sampled rest (one engine
                # batches the two).
                await asyncio.gather(ask(out, 1, 0), sampled(out, 1))
                return
            await sampled(out, 0)

        async def sampled(out: CandidateStream, start: int) -> None:
            """Candidates `start`..n-1: one request with n where the server takes it."""
            want, have = n - start, 0
            if want > 1 and self.supports_n is not False:
                try:
                    have = await ask(out, want, start)
                except ResponseError as exc:
                    if exc.status != 400 or exc.param not in ("n", None):
                        raise
                    self.supports_n = False  # a server limited to n=1 says so with a 400 on `n`
                else:
                    self.supports_n = have >= want
            if have < want:
                out.method = "concurrent" if n > 1 else "n"
                await asyncio.gather(*(ask(out, 1, i) for i in range(start + have, n)))

        return CandidateStream(n, produce, "n" if draw.parallel else "sequential")


@dataclass
class ScriptedCandidates:
    """Replays candidate texts: each call takes the next batch (a list, or a function of the
    messages). Candidate i finishes after `delays_s[i]` seconds (default: all at once, after
    `delay_s`). A text in `cut_off` ends as one that ran to the token limit ("length"). Records
    the messages and draw of every call, and which candidates were cancelled, for tests."""

    batches: list[Sequence[str] | Callable[[list[dict[str, Any]]], Sequence[str]]]
    calls: list[list[dict[str, Any]]] = field(default_factory=list)
    draws: list[Draw] = field(default_factory=list)
    delay_s: float = 0.0
    delays_s: Sequence[float] = ()
    cancelled: list[int] = field(default_factory=list)
    cut_off: Sequence[str] = ()
    continues: bool = False
    """Whether it goes on from a draw's start (`Draw.start`), its texts then being what follows
    the start; False, as a server that cannot: a heal does not ask it to."""

    def stream(self, messages: list[dict[str, Any]], draw: Draw) -> CandidateStream:
        self.calls.append(messages)
        self.draws.append(draw)
        batch = self.batches.pop(0) if self.batches else []
        texts = list(batch(messages) if callable(batch) else batch)[: draw.n]

        async def one(out: CandidateStream, i: int) -> None:
            try:
                await asyncio.sleep(self.delays_s[i] if i < len(self.delays_s) else self.delay_s)
            except asyncio.CancelledError:
                self.cancelled.append(i)
                raise
            out.write(i, (draw.start or "") + texts[i] if self.continues else texts[i])
            out.finish(i, "length" if texts[i] in self.cut_off else "stop")

        async def produce(out: CandidateStream) -> None:
            await asyncio.gather(*(one(out, i) for i in range(len(texts))))

        return CandidateStream(len(texts), produce, "scripted")
