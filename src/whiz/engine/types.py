"""Plain data passed across the engine seam."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FinishReason = Literal["stop", "length", "cancelled", "error"]


@dataclass(frozen=True)
class SamplingParams:
    """How the next token is chosen. temperature 0 means greedy (argmax), which is deterministic."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None


@dataclass(frozen=True)
class LazyGrammar:
    """A grammar that constrains only part of the output, switched on by what the model writes.

    Before a trigger the output is free. Where the output has `tag` (starting at a token
    boundary), rule `tagged` constrains it from the tag on; once that rule is complete the output
    is free again until the next tag. Where the output's start matches the regex `opening` (tried
    while the output is short), rule `opening` constrains the whole output from its first token to
    its end. With `start`, that rule constrains the output from its first token instead (the
    request requires a call). Text is matched in UTF-8 bytes.
    """

    gbnf: str
    tag: str | None = None
    opening: str | None = None
    start: str | None = None


@dataclass
class GenerateRequest:
    """One generation: the full context as token ids, and how much to produce.

    `max_tokens=0` only loads the prompt into the cache (the WebSocket `generate: false` warm-up).
    `session` is a hint for cache placement: turns of one session prefer the same KV sequence.
    `prediction` is text the output is expected to repeat (tokens), drafted ahead and verified;
    `speculation=False` turns all drafting off. Neither changes what is generated, only how fast.
    """

    prompt: list[int]
    max_tokens: int = 256
    sampling: SamplingParams = field(default_factory=SamplingParams)
    stop_tokens: frozenset[int] = frozenset()
    session: str | None = None
    prediction: list[int] | None = None
    speculation: bool = True
    grammar: LazyGrammar | None = None
    """Constrains part of the output (a tool call, well-formed by construction); None: all free."""
    tenant: str | None = None
    """Whose request this is: cached prefixes are shared only between requests of one tenant, so
    one API key cannot learn another's prompt from `cached_tokens` or timings."""
    reuse_chunk: int = 0
    """Reuse cached chunks of at least this many tokens that only moved (text deleted before them),
    shifting their positions as llama.cpp's `--cache-reuse` does; 0: reuse only a common prefix.
    Unlike a common prefix this is not exact: a moved chunk keeps the keys and values computed
    after its old context, so the output may differ from a fresh prefill. Completion at the cursor
    asks for it; chat never does."""


@dataclass
class TokenChunk:
    """Tokens produced in one decode step (one token now; several once drafts are verified)."""

    tokens: list[int]


@dataclass
class GenerationStats:
    """Timings and counts of one generation. Filled in as it runs; final once the stream ends."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    prefill_tokens: int = 0
    prefilled_tokens: int = 0
    """Of `prefill_tokens`, those in the cache so far: it grows a chunk a step while the prompt is
    read (set on the engine thread; what a stream's keep-alive reports as progress)."""
    prefill_ms: float = 0.0
    ttft_ms: float = 0.0
    decode_tokens: int = 0
    decode_ms: float = 0.0
    draft_accepted: int = 0
    draft_rejected: int = 0
    finish_reason: FinishReason | None = None
    error: str | None = None
    replica: str | None = None
    """The upstream replica that ran it, when whiz is a gateway."""
    notes: dict[str, str] = field(default_factory=dict)
    """What whiz changed about this request, and why, by topic: `grammar` when the tool-call
    grammar was let go (its matching cost too much), `prediction` when the prediction was cut.
    Shown in the reply's `whiz` object."""

    @property
    def tokens_per_s(self) -> float:
        """Decode speed after the first token; 0 when too few tokens to tell."""
        if self.decode_tokens < 2 or self.decode_ms <= 0:
            return 0.0
        return (self.decode_tokens - 1) / (self.decode_ms / 1000)


@dataclass(frozen=True)
class EngineInfo:
    """What clients may ask about the loaded model."""

    model: str
    n_ctx: int
    """The most tokens one conversation may hold (prompt plus output)."""
    n_ctx_train: int
    n_seq_max: int
