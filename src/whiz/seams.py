"""The seams of whiz, one small Protocol each.

Everything that can be swapped (the engine, its runtime, the tokenizer) meets the rest of the
system here. Fakes of each ship in the package (`whiz.engine.fake`), so tests run without a model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from whiz.backend.types import BackendInfo, TextDelta, TurnRequest, TurnResult
    from whiz.chat.messages import ToolCall
    from whiz.engine.types import EngineInfo, GenerateRequest, GenerationStats, TokenChunk


class Tokenizer(Protocol):
    """Text to token ids and back. Special tokens such as `<|im_start|>` are parsed in text."""

    def encode(self, text: str) -> list[int]: ...

    def piece(self, token: int) -> bytes:
        """The raw bytes of one token; a multi-byte character may span several tokens."""
        ...

    def is_eog(self, token: int) -> bool:
        """True for end-of-generation tokens (`<|im_end|>`, `<|endoftext|>`)."""
        ...


class Stream(Protocol):
    """One running generation: an async iterator of token chunks that can be cancelled."""

    stats: GenerationStats

    def __aiter__(self) -> AsyncIterator[TokenChunk]: ...

    def cancel(self) -> None:
        """Stop at the next decode step; the stream then ends with finish_reason 'cancelled'."""
        ...


class Engine(Protocol):
    """Token ids in, a token stream out. Knows nothing of text formats or HTTP."""

    info: EngineInfo
    tokenizer: Tokenizer

    def generate(self, request: GenerateRequest) -> Stream: ...

    def generate_many(self, request: GenerateRequest, n: int) -> list[Stream]:
        """`n` candidates for one prompt, decoded together; the prompt is prefilled once."""
        ...

    def close(self) -> None: ...


class Drafter(Protocol):
    """Cheap guesses of what the model writes next, verified by the model in one batch."""

    def propose(self, context: Sequence[int], n: int) -> list[int]:
        """Up to `n` tokens likely to follow `context` (prompt and output so far); [] for none."""
        ...


class GrammarMatcher(Protocol):
    """Where a grammar stands after the tokens accepted so far (the runtime builds it from GBNF)."""

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        """For each token id, whether the grammar allows it next (a bool array)."""
        ...

    def accept(self, token: int) -> None:
        """Advance past `token`, which `allowed` allowed (anything else may abort the process)."""
        ...

    def can_end(self) -> bool:
        """True when the text so far is complete: the output may end here."""
        ...


class Runtime(Protocol):
    """The model itself, driven one batch at a time from a single worker thread.

    A batch is a list of (token, position, sequence id, wants logits) rows. The KV cache is
    addressed by sequence id, as in llama.cpp's memory API.
    """

    n_ctx: int
    n_seq_max: int
    n_vocab: int
    tokenizer: Tokenizer
    shared_cache: bool
    """True when sequences draw cells from one pool, so evicting one frees room for another."""
    batch_costs_ms: dict[int, float]
    """How long batches of a few sizes take, for choosing draft lengths."""

    def decode(self, rows: Sequence[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        """Run one forward pass; return the logits of the rows that asked for them, in order.

        The arrays may be views into the runtime's buffers, valid until the next `decode`.

        Raises `KVCacheFull` when the cache has no room for the batch (nothing is changed then).
        """
        ...

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        """Drop positions [p0, p1) of a sequence; p1 = -1 means to the end."""
        ...

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        """Make dst share src's cache cells for positions [p0, p1)."""
        ...

    can_shift: bool
    """`seq_add` works (llama.cpp can shift the positions of this model's cache)."""

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        """Move a sequence's cells at positions [p0, p1) by `delta` positions."""
        ...

    def grammar(self, gbnf: str, root: str) -> GrammarMatcher:
        """A matcher for `gbnf` from rule `root`, over this runtime's vocabulary.

        Raises `EngineError` when the text is not a grammar the runtime reads."""
        ...


class BackendTurn(Protocol):
    """One model turn in a backend: started lazily, iterated once, cancellable from anywhere."""

    result: TurnResult | None
    """Set once `events()` has ended."""
    prompt_tokens: int
    """The prompt's length in tokens, where the backend knows it before running (else 0)."""
    basis: object
    """The backend's record of the conversation before this turn's reply (a warm-up's result)."""

    async def open(self) -> None:
        """Start the turn; raises a `WhizError` when the backend refuses it (nothing was produced)."""
        ...

    def events(self) -> AsyncIterator[TextDelta | ToolCall]:
        """Text deltas and tool calls as they come; opens the turn first if needed.

        Raises a `WhizError` when the backend fails mid-turn; leaving early cancels the turn.
        """
        ...

    def cancel(self) -> None:
        """Stop soon; the turn then ends with finish_reason 'cancelled'."""
        ...

    def progress(self) -> dict[str, int] | None:
        """How far the prompt's prefill has come, in llama-server's `prompt_progress` shape
        (`total`, `cache`: already cached, `processed`: cached and prefilled so far), where the
        backend knows it (else None)."""
        ...


class Backend(Protocol):
    """Messages in, text and tool calls out: what the APIs run turns on.

    The embedded engine (`whiz.backend.engine`) and OpenAI-compatible upstreams (`whiz.gateway`)
    are the two kinds. A backend that holds resources (connections, a health-check task) is also
    an async context manager, which the app enters for its lifetime.
    """

    info: BackendInfo

    def start(self, request: TurnRequest) -> BackendTurn:
        """Validate a turn and return it, not yet running; raises a `WhizError` for a bad request."""
        ...

    def start_many(self, request: TurnRequest, n: int) -> list[BackendTurn]:
        """`n` candidate turns for one request (chat's `n`); the engine prefills the prompt once."""
        ...

    def count_tokens(self, text: str) -> int:
        """How many tokens `text` is: exact where the backend has the tokenizer, else an estimate."""
        ...

    def status(self) -> dict[str, float]:
        """Gauges for /metrics: metric names after `whiz_`, with Prometheus labels where needed."""
        ...


class Busy(Protocol):
    """Something a server holds open that may have work running: a drain waits until none has
    (a WebSocket session, to the server state that counts them)."""

    def busy(self) -> bool:
        """Whether a turn is running or waiting to run."""
        ...
