"""The draft-model drafter: a small model guesses the next tokens of a bigger one.

The 0.5B coder drafts for the 1.5B (they share a tokenizer). The small model runs greedily on its
own runtime, owned by the scheduler and driven from the scheduler's worker thread. It keeps one
KV sequence per engine slot, mirroring the context the slot's job has written so far; the
sequences outlive jobs, so the next turn of a session only catches up on its new tokens.

Keeping in step costs nothing extra: before each proposal the draft sequence is cut back to
where it agrees with the context (the tokens the big model accepted), and the difference (the
accepted tokens and the model's own token) is decoded in the same batch that yields the first
guess. A long gap (a fresh prompt) is caught up in chunks over several steps, with no draft
meanwhile, so neither the first token nor any one step waits for the small model's prefill.

The big model verifies every draft, so whatever the small model proposes, the output is the big
model's own: identical to plain decoding at temperature 0, the same distribution when sampling.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from whiz.engine.slots import common_prefix
from whiz.errors import EngineError, KVCacheFull
from whiz.seams import Runtime

_PROBES = (
    "def fibonacci(n: int) -> int:\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "<|im_start|>user\nRename `x` to `count`, please. Ünïcödé → 漢字 ✓<|im_end|>\n",
)


def check_compatible(target: Runtime, draft: Runtime) -> None:
    """Raise EngineError unless both runtimes turn text into the same token ids."""
    if target.n_vocab != draft.n_vocab:
        raise EngineError(
            f"the draft model's vocabulary ({draft.n_vocab} tokens) differs from the model's "
            f"({target.n_vocab}); a draft model must share the model's tokenizer"
        )
    for text in _PROBES:
        if target.tokenizer.encode(text) != draft.tokenizer.encode(text):
            raise EngineError(
                "the draft model tokenizes text differently; it must share the model's tokenizer"
            )


class DraftModel:
    """A second runtime that drafts for the engine's model, one KV sequence per engine slot."""

    def __init__(self, runtime: Runtime, *, name: str = "draft", catch_up_chunk: int = 64):
        self.runtime = runtime
        self.name = name
        self.catch_up_chunk = catch_up_chunk
        self.tokens: list[list[int]] = [[] for _ in range(runtime.n_seq_max)]
        """What each draft sequence's cache cells hold, positions 0..len-1."""
        self.tenants: list[str | None] = [None] * runtime.n_seq_max
        """Whose tokens each draft sequence holds: like the engine's slots, a sequence is reused,
        or copied from, only for its own tenant (what the draft model guesses for a request, and
        how long it takes to catch up, would tell what another key's prompt began with)."""
        self.max_context = getattr(runtime, "ctx_per_conversation", runtime.n_ctx // runtime.n_seq_max)
        self.step_ms = runtime.batch_costs_ms[min(runtime.batch_costs_ms)]
        """The cost of one drafted token: a one-row decode of the small model."""
        self.drafted_tokens = 0

    def drafter(self, seq: int, tenant: str | None = None) -> ModelDrafter | None:
        """A drafter for `tenant`'s job running in engine slot `seq` (None if this model has no
        such sequence). Another tenant's cells in that sequence are dropped first."""
        if seq >= len(self.tokens):
            return None
        if self.tenants[seq] != tenant:
            self.forget(seq)
            self.tenants[seq] = tenant
        return ModelDrafter(self, seq)

    def propose(self, seq: int, context: Sequence[int], n: int) -> list[int]:
        """Up to `n` greedy tokens after `context`; [] while still catching up on it."""
        if n <= 0 or not context or len(context) + n > self.max_context:
            return []
        try:
            if not self._catch_up(seq, context):
                return []
            return self._greedy(seq, context, n)
        except (KVCacheFull, EngineError):
            # The small model failed mid-batch: start this sequence over rather than trust its cells.
            self.forget(seq)
            return []

    def forget(self, seq: int) -> None:
        """Drop everything draft sequence `seq` holds."""
        self.runtime.seq_rm(seq, 0, -1)
        self.tokens[seq] = []

    def _catch_up(self, seq: int, context: Sequence[int]) -> bool:
        """Trim the sequence to its agreement with `context`; feed a chunk if far behind.

        True when at most one chunk is left, which the first drafting decode takes along.
        """
        cached = self.tokens[seq]
        # The last context token is always decoded again: its logits give the first guess.
        keep = min(common_prefix(cached, context), len(context) - 1)
        if len(context) - keep > self.catch_up_chunk:
            # Far behind: a sibling may hold more of this context (a shared system prompt, or the
            # candidate this one was forked from); copying its cells beats recomputing them.
            mine = [s for s in range(len(self.tokens)) if self.tenants[s] == self.tenants[seq]]
            donor = max(mine, key=lambda s: common_prefix(self.tokens[s], context))
            shared = min(common_prefix(self.tokens[donor], context), len(context) - 1)
            if donor != seq and shared > keep:
                self.runtime.seq_rm(seq, 0, -1)
                self.runtime.seq_cp(donor, seq, 0, shared)
                cached[:] = self.tokens[donor][:shared]
                keep = shared
        if keep < len(cached):
            self.runtime.seq_rm(seq, keep, -1)
            del cached[keep:]
        gap = context[keep:]
        if len(gap) <= self.catch_up_chunk:
            return True
        chunk = gap[: self.catch_up_chunk]
        self.runtime.decode([(t, keep + i, seq, False) for i, t in enumerate(chunk)])
        cached.extend(chunk)
        return False

    def _greedy(self, seq: int, context: Sequence[int], n: int) -> list[int]:
        cached = self.tokens[seq]
        gap = context[len(cached) :]
        rows = [(t, len(cached) + i, seq, i == len(gap) - 1) for i, t in enumerate(gap)]
        logits = self.runtime.decode(rows)[0]
        cached.extend(gap)
        out = [int(np.argmax(logits))]
        # The last guess is never decoded here: if the big model keeps it, the next call feeds it.
        while len(out) < n and not self.runtime.tokenizer.is_eog(out[-1]):
            logits = self.runtime.decode([(out[-1], len(cached), seq, True)])[0]
            cached.append(out[-1])
            out.append(int(np.argmax(logits)))
        self.drafted_tokens += len(out)
        return out


class ModelDrafter:
    """The `Drafter` of one job: the draft model's guesses for the job's slot."""

    def __init__(self, model: DraftModel, seq: int):
        self.model = model
        self.seq = seq

    def propose(self, context: Sequence[int], n: int) -> list[int]:
        return self.model.propose(self.seq, context, n)
