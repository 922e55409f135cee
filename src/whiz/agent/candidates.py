"""N candidate replies to one conversation, for healing: the `CandidateSource` seam and its adapters.

`ChatCandidates` asks an OpenAI-compatible server (over HTTP, or a server's own chat service in
the same process: anything with `ChatPoster.post`). In parallel (the default) it sends one request
with `n=N`: whiz decodes the N candidates as N sequences in one engine, prefilling the prompt
once and sharing its KV cache. A server that ignores or refuses `n` gets the missing candidates
as concurrent single requests instead (still batched together by a whiz engine, but each
prefills the prompt). `parallel=False` decodes them one after another, which is what the
parallel path is measured against. Candidate i is sampled with seed + i either way, so the two
paths produce the same candidates from a batch-invariant engine.

`ScriptedCandidates` replays fixed texts for tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from whiz.agent.repomap import len_based_estimate
from whiz.client import ResponseError

Method = Literal["n", "concurrent", "sequential", "scripted"]


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


class CandidateSource(Protocol):
    """Produces `n` sampled replies to a chat conversation."""

    async def generate(
        self,
        messages: list[dict[str, Any]],
        n: int,
        *,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
        parallel: bool = True,
    ) -> Generation: ...


class ChatPoster(Protocol):
    """Posts a JSON body to an OpenAI-compatible path; an error answer raises `ResponseError`.
    `HttpClient` is one; the web app's heal uses its own server's chat service."""

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]: ...


class ChatCandidates:
    """Candidates from `POST /v1/chat/completions` on `http` (not closed here)."""

    def __init__(self, http: ChatPoster, model: str | None = None):
        self.http = http
        self.model = model
        self.supports_n: bool | None = None
        """Learned on the first parallel call: whether the server returned n choices for n."""

    async def generate(
        self,
        messages: list[dict[str, Any]],
        n: int,
        *,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
        parallel: bool = True,
    ) -> Generation:
        started = time.perf_counter()
        request: dict[str, Any] = {"messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        if self.model:
            request["model"] = self.model

        async def ask(count: int, first: int) -> dict[str, Any]:
            """`count` candidates in one request, the first sampled with seed + `first`."""
            body = {**request, "n": count} if count > 1 else dict(request)
            if seed is not None:
                body["seed"] = seed + first
            return await self.http.post("/chat/completions", body)

        if not parallel:
            answers = [await ask(1, i) for i in range(n)]
            return _generation(answers, started, "sequential")
        answers: list[dict[str, Any]] = []
        method: Method = "n"
        if n > 1 and self.supports_n is not False:
            try:
                answers.append(await ask(n, 0))
            except ResponseError as exc:
                if exc.status != 400 or exc.param not in ("n", None):
                    raise
                self.supports_n = False  # a server limited to n=1 says so with a 400 on `n`
            else:
                self.supports_n = len(answers[0]["choices"]) >= n
        have = sum(len(a["choices"]) for a in answers)
        if have < n:
            method = "concurrent" if n > 1 else "n"
            answers.extend(await asyncio.gather(*(ask(1, i) for i in range(have, n))))
        return _generation(answers, started, method)


def _generation(answers: list[dict[str, Any]], started: float, method: Method) -> Generation:
    texts, tokens, reasons, prompt = [], [], [], 0
    for answer in answers:
        choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
        usage = answer.get("usage") or {}
        prompt = max(prompt, usage.get("prompt_tokens", 0))
        found = [(c.get("message") or {}).get("content") or "" for c in choices]
        texts += found
        tokens += _split_tokens(found, usage.get("completion_tokens"))
        reasons += [c.get("finish_reason") or "stop" for c in choices]
    return Generation(texts, tokens, (time.perf_counter() - started) * 1000, method, prompt, reasons)


def _split_tokens(texts: list[str], total: int | None) -> list[int]:
    """Output tokens per choice. Usage counts all choices together, so a total is shared out in
    proportion to each text's estimated size (exact for a single choice)."""
    estimates = [max(1, len_based_estimate(t)) for t in texts]
    if not total or not texts:
        return estimates
    scale = total / sum(estimates)
    return [max(1, round(e * scale)) for e in estimates]


@dataclass
class ScriptedCandidates:
    """Replays candidate texts: each call takes the next batch (a list, or a function of the
    messages). Records the messages of every call, for tests."""

    batches: list[Sequence[str] | Callable[[list[dict[str, Any]]], Sequence[str]]]
    calls: list[list[dict[str, Any]]] = field(default_factory=list)
    delay_s: float = 0.0

    async def generate(
        self,
        messages: list[dict[str, Any]],
        n: int,
        *,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
        parallel: bool = True,
    ) -> Generation:
        self.calls.append(messages)
        started = time.perf_counter()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        batch = self.batches.pop(0) if self.batches else []
        texts = list(batch(messages) if callable(batch) else batch)[:n]
        return Generation(
            texts,
            [max(1, len_based_estimate(t)) for t in texts],
            (time.perf_counter() - started) * 1000,
            "scripted",
            finish_reasons=["stop"] * len(texts),
        )
