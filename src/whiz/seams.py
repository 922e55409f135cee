"""The seams of whiz, one small Protocol each.

Everything that can be swapped (the engine, its runtime, the tokenizer) meets the rest of the
system here. Fakes of each ship in the package (`whiz.engine.fake`), so tests run without a model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

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
