"""The measurements of `whiz bench serve`, one method each, on one server.

Each `measure_*` adds table rows and fills `summary`. Conversations go through `conversations.py`,
so a measurement reads the same over WebSocket mode and over HTTP.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from whiz.bench.conversations import ChatConversation, Conversation, MessagesConversation, SocketConversation
from whiz.bench.corpus import SYSTEM_TEXT, Corpus, nonce
from whiz.bench.report import Row
from whiz.client import (
    ClientError,
    ConnectError,
    Exchange,
    HttpClient,
    ResponseError,
    ResponsesSocket,
)

Progress = Callable[[str], None]

DECODE_PROMPT = (
    "Write a complete Python module implementing an LRU cache class with get, put and resize methods, "
    "full docstrings, and a unittest test case covering eviction order. Output only code."
)


@dataclass(frozen=True)
class Plan:
    """The sizes of one run; `quick` shrinks everything for tests and smoke checks."""

    history_tokens: tuple[int, ...]
    repeats: int
    interleaved_sessions: int
    interleaved_history_tokens: int
    shared_prefix_tokens: int
    decode_tokens: int
    roundtrips: int
    reply_tokens: int = 8

    @classmethod
    def make(cls, quick: bool) -> Plan:
        if quick:
            return cls((0, 256, 512), 2, 4, 512, 512, 32, 5)
        return cls((0, 1024, 2048, 4096), 3, 4, 2048, 6144, 200, 20)


def size_label(n_tokens: int) -> str:
    return f"{n_tokens // 1024}k" if n_tokens >= 1024 and n_tokens % 1024 == 0 else str(n_tokens)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def tokens_note(turn: Exchange) -> str:
    if turn.input_tokens is None:
        return ""
    cached = turn.cached_tokens
    return f"{turn.input_tokens}" + (f" ({cached})" if cached is not None else "")


def sources(turns: list[Exchange]) -> str:
    return "/".join(sorted({t.ttft_source for t in turns}))


class ServeBench:
    """One run against one server. Each `measure_*` adds table rows and fills `summary`."""

    def __init__(self, target: str, model: str | None, api_key: str | None, plan: Plan, progress: Progress):
        self.target = target
        self.model = model or ""
        self.api_key = api_key
        self.plan = plan
        self.progress = progress
        self.http = HttpClient(target, api_key)
        self.corpus = Corpus()
        self.ws_ok = False
        self.ws_reason = ""
        self.messages_ok = False
        """Whether the target speaks Anthropic's Messages API (whiz does; most OpenAI servers not)."""
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self.summary: dict[str, Any] = {}

    # -- setup -----------------------------------------------------------------------------------

    async def setup(self) -> None:
        """Pick the model, check for WebSocket mode, and learn the tokenizer's chars per token."""
        if not self.model:
            models = await self.http.models()
            if not models:
                raise ClientError(f"{self.http.base}/models lists no model; pass --model")
            self.model = models[0]
        try:
            sock = await ResponsesSocket.open(self.target, self.api_key)
            await sock.close()
            self.ws_ok = True
        except ConnectError as exc:
            self.ws_reason = str(exc)
            self.notes.append(f"no WebSocket mode, WS rows skipped: {exc}")
        try:
            body = {"model": self.model, "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]}
            await self.http.messages_turn(body)
            self.messages_ok = True
        except ClientError as exc:
            self.notes.append(f"no Anthropic Messages API, its rows skipped: {exc}")
        await self.calibrate()

    async def calibrate(self) -> None:
        """Measure chars per token from the server's usage, so history sizes are in real tokens."""
        text = self.corpus.text(600)

        async def input_tokens(content: str) -> int | None:
            body = {
                "model": self.model,
                "max_tokens": 1,
                "temperature": 0,
                "messages": [{"role": "user", "content": nonce() + content}],
            }
            return (await self.http.chat_turn(body)).input_tokens

        small, large = await input_tokens(""), await input_tokens(text)
        if small is not None and large is not None and large > small:
            self.corpus.chars_per_token = len(text) / (large - small)
            self.notes.append(f"tokenizer: {self.corpus.chars_per_token:.2f} chars/token (from server usage)")
        else:
            self.notes.append("server reports no usage; sizes assume 3.5 chars/token")

    async def conversation(self, transport: str, instructions: str | None = None) -> Conversation:
        instructions = instructions or f"{nonce()} {SYSTEM_TEXT}"
        if transport == "ws":
            return await SocketConversation.open(self.target, self.api_key, self.model, instructions)
        if transport == "anthropic":
            return MessagesConversation(self.http, self.model, instructions)
        return ChatConversation(self.http, self.model, instructions)

    @property
    def transports(self) -> list[str]:
        return ["ws", "http"] if self.ws_ok else ["http"]

    def skip(self, what: str, transport: str = "ws") -> None:
        missing = "WebSocket mode" if transport == "ws" else "Anthropic Messages API"
        self.rows.append(Row(what, transport, None, note=f"server has no {missing}"))

    # -- measurements ----------------------------------------------------------------------------

    async def measure_cold(self) -> None:
        """A first turn on a never-seen prompt: the nonce leads the instructions."""
        transport = self.transports[0]
        turns = []
        for i in range(self.plan.repeats):
            self.progress(f"cold first turn {i + 1}/{self.plan.repeats} ({transport})")
            conv = await self.conversation(transport)
            try:
                turns.append(await conv.say(self.corpus.question(), self.plan.reply_tokens))
            finally:
                await conv.close()
        value = median([t.ttft_ms for t in turns])
        self.summary["cold_ttft_ms"] = value
        self.rows.append(
            Row(
                "TTFT cold first turn", transport, value, source=sources(turns), tokens=tokens_note(turns[-1])
            )
        )

    async def warm_series(self, transport: str, history_tokens: int) -> list[Exchange]:
        conv = await self.conversation(transport)
        try:
            await conv.prime(self.corpus.history(history_tokens))
            return [
                await conv.say(self.corpus.question(), self.plan.reply_tokens)
                for _ in range(self.plan.repeats)
            ]
        finally:
            await conv.close()

    async def measure_warm(self) -> None:
        """Follow-up turns on a conversation whose history the server has already seen."""
        warm: dict[str, dict[str, float | None]] = {"ws": {}, "http": {}, "anthropic": {}}
        available = [*self.transports, *(["anthropic"] if self.messages_ok else [])]
        notes = {
            "ws": "new message only",
            "http": "full history resent",
            "anthropic": "full history, /v1/messages",
        }
        for size in self.plan.history_tokens:
            label = size_label(size)
            for transport in warm:
                what = f"TTFT warm turn, {label} history"
                if transport not in available:
                    self.skip(what, transport)
                    warm[transport][label] = None
                    continue
                self.progress(f"warm turn, {label} history ({transport})")
                turns = await self.warm_series(transport, size)
                value = median([t.ttft_ms for t in turns])
                warm[transport][label] = value
                note = notes[transport]
                self.rows.append(
                    Row(
                        what,
                        transport,
                        value,
                        source=sources(turns),
                        tokens=tokens_note(turns[-1]),
                        note=note,
                    )
                )
        self.summary["warm_ttft_ms"] = warm

    async def measure_interleaved(self) -> None:
        """Several sessions taking turns (A1 B1 C1 D1 A2 ...), one WebSocket connection each."""
        n, size = self.plan.interleaved_sessions, self.plan.interleaved_history_tokens
        what = f"TTFT warm turn, {n} sessions interleaved, {size_label(size)} history each"
        if not self.ws_ok:
            self.skip(what)
            self.summary["interleaved_ttft_ms"] = None
            return
        convs = [await self.conversation("ws") for _ in range(n)]
        turns: list[Exchange] = []
        try:
            for i, conv in enumerate(convs):
                self.progress(f"interleaved: priming session {i + 1}/{n}")
                await conv.prime(self.corpus.history(size))
            for r in range(self.plan.repeats):
                self.progress(f"interleaved: round {r + 1}/{self.plan.repeats}")
                for conv in convs:
                    turns.append(await conv.say(self.corpus.question(), self.plan.reply_tokens))
        finally:
            for conv in convs:
                await conv.close()
        value = median([t.ttft_ms for t in turns])
        self.summary["interleaved_ttft_ms"] = value
        self.rows.append(
            Row(what, "ws", value, source=sources(turns), tokens=tokens_note(turns[-1]), note="median")
        )

    async def measure_shared_prefix(self) -> None:
        """A new session over a long prefix an earlier session used: prefix reuse across sessions."""
        size = self.plan.shared_prefix_tokens
        instructions = f"{nonce()} {SYSTEM_TEXT}\n\nProject context:\n{self.corpus.text(size)}"
        transport = self.transports[0]
        turns = []
        for i in range(3):  # the first session is cold; the median of two later ones is "second"
            self.progress(f"shared {size_label(size)} prefix: session {i + 1}/3 ({transport})")
            conv = await self.conversation(transport, instructions)
            try:
                turns.append(await conv.say(self.corpus.question(), self.plan.reply_tokens))
            finally:
                await conv.close()
        first, second = turns[0].ttft_ms, median([t.ttft_ms for t in turns[1:]])
        self.summary["shared_prefix_ttft_ms"] = {"first": first, "second": second}
        label = size_label(size)
        self.rows.append(
            Row(
                f"TTFT new session, {label} prefix unseen",
                transport,
                first,
                source=sources(turns[:1]),
                tokens=tokens_note(turns[0]),
            )
        )
        self.rows.append(
            Row(
                f"TTFT new session, {label} prefix seen before",
                transport,
                second,
                source=sources(turns[1:]),
                tokens=tokens_note(turns[-1]),
                note="median of 2",
            )
        )

    async def measure_decode(self) -> None:
        """One long greedy generation of code."""
        transport = self.transports[0]
        self.progress(f"decode {self.plan.decode_tokens} tokens ({transport})")
        conv = await self.conversation(transport)
        try:
            turn = await conv.say(DECODE_PROMPT, self.plan.decode_tokens)
        finally:
            await conv.close()
        value, source = turn.whiz.get("tokens_per_s"), "server"
        if value is None:
            source = "client"
            # The first token's wait is prefill, so the clock starts after it.
            decode_s = (turn.finished_at or 0) - (turn.first_delta_at or 0)
            produced = (turn.output_tokens or len(turn.text) / self.corpus.chars_per_token) - 1
            value = produced / decode_s if decode_s > 0 and produced > 0 else None
        self.summary["decode_tokens_per_s"] = value
        self.summary["decode_output_tokens"] = turn.output_tokens
        self.rows.append(
            Row(
                "decode",
                transport,
                value,
                unit="tok/s",
                source=source,
                note=f"{turn.output_tokens} tokens out",
            )
        )

    async def measure_roundtrip(self) -> None:
        """The fixed cost of one turn: a warm-up with no new input, chained on a warm conversation.

        With nothing new to prefill, what is left is the transport, parsing and bookkeeping.
        """
        roundtrip: dict[str, float | None] = {"ws": None, "http": None}
        fields: dict[str, Any] = {"generate": False}
        http_value, http_source, http_note = await self._http_roundtrip(fields)
        if http_note.startswith("generate rejected"):
            fields = {"max_output_tokens": 1, "temperature": 0}
            self.notes.append("HTTP rejected generate:false; both round trips use max_output_tokens=1")
            http_value, http_source, http_note = await self._http_roundtrip(fields)
        if self.ws_ok:
            self.progress(f"round trip x{self.plan.roundtrips} (ws)")
            conv = await self.conversation("ws")
            try:
                await conv.prime(self.corpus.history(256))
                samples, subtracted = [], True
                for _ in range(self.plan.roundtrips):
                    turn = await conv.send([], **fields)
                    conv.last_id = turn.id
                    samples.append(self.overhead_ms(turn))
                    subtracted = subtracted and "prefill_ms" in turn.whiz
            finally:
                await conv.close()
            roundtrip["ws"] = median(samples)
            self.rows.append(
                Row(
                    "round trip, empty chained turn",
                    "ws",
                    roundtrip["ws"],
                    source="client" + (" - server prefill" if subtracted else ""),
                    note=f"median of {len(samples)}",
                )
            )
        else:
            self.skip("round trip, empty chained turn")
        roundtrip["http"] = http_value
        self.rows.append(
            Row("round trip, empty chained turn", "http", http_value, source=http_source, note=http_note)
        )
        self.summary["roundtrip_ms"] = roundtrip

    @staticmethod
    def overhead_ms(turn: Exchange) -> float:
        """Client wall time less the server's prefill: what the transport and bookkeeping cost."""
        return turn.total_ms - float(turn.whiz.get("prefill_ms") or 0)

    async def _http_roundtrip(self, fields: dict[str, Any]) -> tuple[float | None, str, str]:
        """POST /v1/responses (non-streaming) chained by previous_response_id; returns (ms, source, note)."""
        self.progress(f"round trip x{self.plan.roundtrips} (http)")
        instructions = f"{nonce()} {SYSTEM_TEXT}"
        body: dict[str, Any] = {"model": self.model, "instructions": instructions, **fields}
        note = f"POST /v1/responses, median of {self.plan.roundtrips}"
        try:
            first = await self.http.responses_turn({**body, "input": self.corpus.history(256)}, stream=False)
        except ResponseError as exc:
            if exc.param == "generate" or "generate" in exc.message:
                return None, "", "generate rejected"
            return None, "", f"POST /v1/responses failed: {exc}"
        previous, samples, subtracted = first.id, [], True
        for _ in range(self.plan.roundtrips):
            try:
                turn = await self.http.responses_turn(
                    {**body, "input": [], "previous_response_id": previous}, stream=False
                )
            except ResponseError as exc:
                if exc.code != "previous_response_not_found":
                    raise
                note += "; previous_response_id not kept over HTTP, unchained"
                previous = None
                continue
            previous = turn.id if previous is not None else None
            samples.append(self.overhead_ms(turn))
            subtracted = subtracted and "prefill_ms" in turn.whiz
        return median(samples), "client" + (" - server prefill" if subtracted else ""), note

    async def close(self) -> None:
        await self.http.close()
