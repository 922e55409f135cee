"""Which KV-cache sequence a request runs in, and how much of its prompt is already cached.

The engine holds one llama.cpp context with a unified KV cache and `n_seq_max` sequences
("slots"). A slot keeps the tokens of its last conversation after the request ends, so the next
turn of that conversation only prefills what is new. Prefixes are shared across slots: a request
whose prompt starts like another slot's (the same 6k-token agent system prompt, say) gets those
cells copied, which in a unified cache shares them instead of recomputing them.

This module is pure bookkeeping; the scheduler applies the plan to the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    # Compare in blocks first: prompts are thousands of tokens and usually agree for most of them.
    step = 256
    while i + step <= n and a[i : i + step] == b[i : i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


Move = tuple[int, int, int]
"""(old position, new position, length): cache cells a prompt reuses where they moved."""


def shifted_chunks(cached: list[int], prompt: list[int], start: int, min_len: int) -> tuple[list[Move], int]:
    """Chunks of `cached` after `start` that recur, in order and closer together, in `prompt`.

    llama.cpp's `--cache-reuse` rule: from the end of the common prefix, walk the cache; where at
    least `min_len` of its tokens are the prompt's next tokens, they are reused, moved back to
    where the prompt has them; other cached tokens are skipped (text deleted from the prompt).
    Reuse stops at the first prompt token the rest of the cache lacks, because llama.cpp only
    decodes after a sequence's last position: text inserted, or changed, in the middle is
    prefilled with everything after it. Returns the moves and how many prompt tokens are then
    cached (the reused prefix, positions 0 to that count less one).
    """
    moves: list[Move] = []
    head_c = head_p = start
    if min_len <= 0:
        return moves, start
    while head_c < len(cached) and head_p < len(prompt):
        n = 0
        room = min(len(cached) - head_c, len(prompt) - head_p)
        while n < room and cached[head_c + n] == prompt[head_p + n]:
            n += 1
        if n >= min_len:
            moves.append((head_c, head_p, n))
            head_c += n
            head_p += n
        else:
            head_c += 1
    return moves, head_p


@dataclass
class Slot:
    """One KV sequence and the tokens its cache cells hold, positions 0..len-1."""

    seq: int
    tokens: list[int] = field(default_factory=list)
    busy: bool = False
    session: str | None = None
    tenant: str | None = None
    """Whose tokens the cache holds; only that tenant's requests reuse them."""
    last_used: int = 0


@dataclass(frozen=True)
class Placement:
    """Where a request runs: its slot, how many prompt tokens to keep, and a prefix donor."""

    slot: Slot
    keep: int
    """Prompt tokens already in the slot's cache after the plan is applied."""
    donor: Slot | None = None
    """Copy positions [0, keep) from this slot's cache before running."""
    moves: tuple[Move, ...] = ()
    """Chunks of the slot's cache to shift to new positions first (see `shifted_chunks`); the
    prompt's first `keep` tokens are then the common prefix and these chunks."""


class SlotTable:
    """Chooses slots for requests and remembers what each slot's cache holds."""

    def __init__(self, n_slots: int):
        self.slots = [Slot(seq=i) for i in range(n_slots)]
        self._clock = 0

    def touch(self, slot: Slot) -> None:
        self._clock += 1
        slot.last_used = self._clock

    def place(
        self,
        prompt: list[int],
        session: str | None,
        *,
        need_logits: bool,
        near: int | None = None,
        tenant: str | None = None,
        reuse_chunk: int = 0,
    ) -> Placement | None:
        """Plan where `prompt` runs, or None when every slot is busy.

        The slot is, in order of preference: the session's own slot; a slot whose whole content
        is a prefix of the prompt (the same conversation, continued); an empty slot; the least
        recently used one. A slot that holds a different conversation is only overwritten last,
        so sharing a system prompt never costs another session its cache. Only slots of the same
        `tenant` count as cached: another API key's prefix is never reused (its timing and
        `cached_tokens` would tell what that key's prompt holds). A candidate of a request
        (`near`: its leader's sequence) takes the idle slot nearest to its leader, empty ones
        first: llama.cpp decodes consecutive sequences in one forward pass and scattered ones in
        one pass each. With `reuse_chunk`, chunks of at least that many tokens of the slot's cache
        that only moved are reused too (`shifted_chunks`).
        """
        idle = [s for s in self.slots if not s.busy]
        if not idle:
            return None
        lcp = {s.seq: common_prefix(s.tokens, prompt) if s.tenant == tenant else 0 for s in self.slots}
        own = [s for s in idle if session is not None and s.session == session and s.tenant == tenant]
        extending = [s for s in idle if s.tokens and s.tenant == tenant and lcp[s.seq] == len(s.tokens)]
        empty = [s for s in idle if not s.tokens]
        if own:
            target = own[0]
        elif extending:
            target = max(extending, key=lambda s: lcp[s.seq])
        elif near is not None:
            # Side by side beats recency here: a scattered candidate costs a forward pass per step.
            target = min(idle, key=lambda s: (bool(s.tokens), abs(s.seq - near), s.last_used))
        elif empty:
            target = empty[0]
        else:
            target = min(idle, key=lambda s: s.last_used)
        keep = lcp[target.seq]
        donor = max(self.slots, key=lambda s: lcp[s.seq])
        use_donor = donor is not target and lcp[donor.seq] > keep
        moves: list[Move] = []
        if reuse_chunk > 0 and target.tenant == tenant:
            moves, shifted = shifted_chunks(target.tokens, prompt, keep, reuse_chunk)
            if moves and lcp[donor.seq] < shifted:
                use_donor, keep = False, shifted
            else:
                moves = []
        if use_donor:
            keep = lcp[donor.seq]
        # The last prompt token must be decoded again to get the logits of the next one.
        if need_logits and keep >= len(prompt):
            keep = len(prompt) - 1
            moves = [(c, p, min(n, keep - p)) for c, p, n in moves if p < keep]
        return Placement(
            slot=target, keep=max(keep, 0), donor=donor if use_donor else None, moves=tuple(moves)
        )

    def evictable(self) -> Slot | None:
        """The least recently used idle slot that still holds tokens, if any."""
        idle = [s for s in self.slots if not s.busy and s.tokens]
        return min(idle, key=lambda s: s.last_used) if idle else None

    def cached_tokens(self) -> int:
        return sum(len(s.tokens) for s in self.slots)
