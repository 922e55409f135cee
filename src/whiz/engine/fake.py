"""A fake runtime and tokenizer, shipped in the package so tests need no model.

The fake is faithful where the scheduler could go wrong: its KV cache has a fixed number of
cells that sequences share after `seq_cp`, it raises KVCacheFull when full, and it refuses a
batch whose positions don't continue what the sequence already holds. Its "model" replies with
whatever a script returns for the conversation, one byte per token, so tests know the answer.
`miss_every` makes it guess wrong now and then, like a small draft model next to a big one;
a low `confidence` (the scripted token's logit; the others are 0) makes sampling stray from it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

import numpy as np

from whiz.engine.draft_model import DraftModel
from whiz.engine.gbnf import Gbnf, GbnfMatcher
from whiz.engine.prefix_cache import PrefixCache
from whiz.engine.scheduler import Scheduler
from whiz.engine.types import EngineInfo
from whiz.errors import EngineError, KVCacheFull

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + ")")
_ASSISTANT = b"<|im_start|>assistant\n"
_FAKE_STATE = b"FAKEKV"


def byte_matchers():
    """The fake runtime's matchers where `grammar_process.py` builds them, in its child: GBNF over
    `ByteTokenizer`'s bytes."""
    tokenizer = ByteTokenizer()
    return lambda gbnf, root: GbnfMatcher(Gbnf(gbnf, root), tokenizer)


class ByteTokenizer:
    """One token per byte (ids 0-255), plus ChatML's special tokens (256 and up)."""

    n_vocab = 256 + len(SPECIALS)

    def __init__(self) -> None:
        self._special_ids = {s: 256 + i for i, s in enumerate(SPECIALS)}
        self.eos = self._special_ids["<|endoftext|>"]
        self.im_end = self._special_ids["<|im_end|>"]

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for part in _SPECIAL_RE.split(text):
            if part in self._special_ids:
                ids.append(self._special_ids[part])
            elif part:
                ids.extend(part.encode())
        return ids

    def piece(self, token: int) -> bytes:
        return bytes([token]) if token < 256 else SPECIALS[token - 256].encode()

    def is_eog(self, token: int) -> bool:
        return token in (self.eos, self.im_end)


def last_user_message(conversation: str) -> str:
    """The text of the last user turn in a ChatML conversation."""
    found = re.findall(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", conversation, re.S)
    return found[-1] if found else ""


def echo_script(conversation: str) -> str:
    return "echo: " + last_user_message(conversation)


class FakeRuntime:
    """A `Runtime` whose next token is the next byte of `script(conversation so far)`."""

    shared_cache = True  # one pool of cells, like a unified llama.cpp cache
    batch_costs_ms = {1: 1.0, 64: 8.0}  # cheap batches, so the fake drafts eagerly

    def __init__(
        self,
        script: Callable[[str], str] = echo_script,
        *,
        n_ctx: int = 8192,
        n_seq_max: int = 4,
        step_s: float = 0.002,
        token_s: float = 0.0001,
        miss_every: int = 0,
        confidence: float = 30.0,
    ):
        self.tokenizer = ByteTokenizer()
        self.script = script
        self.n_ctx = n_ctx
        self.n_seq_max = n_seq_max
        self.n_vocab = ByteTokenizer.n_vocab
        self.step_s = step_s
        self.token_s = token_s
        self.miss_every = miss_every
        self.confidence = confidence
        # Each cell holds (position, token) and the set of sequences that share it.
        self._cells: list[tuple[int, int, set[int]]] = []
        # Each sequence's tokens in position order and their text, kept from one step to the next
        # until the sequence's cells change otherwise (seq_rm, seq_cp, seq_state_set): rebuilding
        # them from the cells at every step made a reply cost time quadratic in its length.
        self._seq_tokens: dict[int, list[int]] = {}
        self._seq_text: dict[int, bytes] = {}
        self._history_text: tuple[list[int] | None, int, bytes] = (None, 0, b"")
        """The bytes of the history `decode` is about to ask `_logits` about (subclasses that
        override `_logits` take the history alone)."""
        self.decoded_tokens = 0
        self.decode_calls = 0
        self.restored_tokens = 0
        self.shifted_tokens = 0
        self._grammars: dict[tuple[str, str], Gbnf] = {}
        """The last few grammars parsed, newest last."""

    def _tokens(self, seq: int) -> list[int]:
        """The sequence's tokens in position order (not to be changed by the caller)."""
        if (kept := self._seq_tokens.get(seq)) is not None:
            return kept
        mine = sorted((pos, tok) for pos, tok, seqs in self._cells if seq in seqs)
        if [p for p, _ in mine] != list(range(len(mine))):
            raise EngineError(f"sequence {seq} has a gap in its positions")
        tokens = self._seq_tokens[seq] = [t for _, t in mine]
        return tokens

    def _bytes(self, seq: int) -> bytes:
        if (kept := self._seq_text.get(seq)) is None:
            kept = self._seq_text[seq] = b"".join(self.tokenizer.piece(t) for t in self._tokens(seq))
        return kept

    def _changed(self, seq: int) -> None:
        self._seq_tokens.pop(seq, None)
        self._seq_text.pop(seq, None)

    def decode(self, rows: Sequence[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        if len(self._cells) + len(rows) > self.n_ctx:
            raise KVCacheFull("the fake KV cache is full")
        seqs = {r[2] for r in rows}
        history = {seq: list(self._tokens(seq)) for seq in seqs}
        texts = {seq: bytearray(self._bytes(seq)) for seq in seqs}
        outputs = []
        for token, pos, seq, wants in rows:
            if pos != len(history[seq]):
                raise EngineError(f"sequence {seq}: position {pos} does not follow {len(history[seq])} cells")
            history[seq].append(token)
            texts[seq] += self.tokenizer.piece(token)
            if wants:
                self._history_text = (history[seq], len(history[seq]), bytes(texts[seq]))
                outputs.append(self._logits(history[seq]))
        for token, pos, seq, _ in rows:
            self._cells.append((pos, token, {seq}))
        self._seq_tokens.update(history)
        self._seq_text.update((seq, bytes(text)) for seq, text in texts.items())
        self.decoded_tokens += len(rows)
        self.decode_calls += 1
        time.sleep(self.step_s + self.token_s * len(rows))
        return outputs

    def _logits(self, history: list[int]) -> np.ndarray:
        """The next token's logits after a sequence's whole `history`."""
        kept, length, text = self._history_text
        if kept is not history or length != len(history):
            text = b"".join(self.tokenizer.piece(t) for t in history)
        cut = text.rfind(_ASSISTANT)
        logits = np.zeros(self.n_vocab, dtype=np.float32)
        nxt = self.tokenizer.im_end
        if cut >= 0:
            reply = self.script(text[:cut].decode(errors="replace")).encode()
            written = text[cut + len(_ASSISTANT) :]
            if reply.startswith(written) and len(written) < len(reply):
                nxt = reply[len(written)]
                if self.miss_every and len(written) % self.miss_every == self.miss_every - 1:
                    nxt = ord("?") if nxt != ord("?") else ord("!")
        logits[nxt] = self.confidence
        return logits

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        self._changed(seq)
        end = p1 if p1 >= 0 else float("inf")
        kept = []
        for pos, tok, seqs in self._cells:
            if p0 <= pos < end:
                seqs.discard(seq)
            if seqs:
                kept.append((pos, tok, seqs))
        self._cells = kept

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self._changed(dst)
        end = p1 if p1 >= 0 else float("inf")
        for pos, _tok, seqs in self._cells:
            if src in seqs and p0 <= pos < end:
                seqs.add(dst)

    can_shift = True

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        end = p1 if p1 >= 0 else float("inf")
        moved = []
        for pos, tok, seqs in self._cells:
            if seq in seqs and p0 <= pos < end:
                seqs.discard(seq)  # another sequence sharing the cell keeps it where it was
                moved.append((pos + delta, tok, {seq}))
        self._cells = [c for c in self._cells if c[2]] + moved
        self.shifted_tokens += len(moved)

    def seq_state_get(self, seq: int) -> bytearray:
        """The sequence's tokens, in position order: all the state the fake's "model" has."""
        return bytearray(_FAKE_STATE + np.array(self._tokens(seq), dtype="<i4").tobytes())

    def seq_state_set(self, seq: int, data: bytearray) -> None:
        self.seq_rm(seq, 0, -1)
        body = bytes(data)
        if not body.startswith(_FAKE_STATE) or (len(body) - len(_FAKE_STATE)) % 4:
            raise EngineError(f"not a fake sequence state ({len(body)} bytes)")
        tokens = np.frombuffer(body[len(_FAKE_STATE) :], dtype="<i4")
        if len(self._cells) + len(tokens) > self.n_ctx:
            raise KVCacheFull("the fake KV cache is full")
        self._cells.extend((pos, int(tok), {seq}) for pos, tok in enumerate(tokens))
        self._changed(seq)
        self.restored_tokens += len(tokens)

    def grammar(self, gbnf: str, root: str) -> GbnfMatcher:
        # Parsed once per (text, root) for the last few grammars: a request's every tool call, and
        # an agent's every turn, use the same one, and parsing a large one in Python takes seconds
        # of the engine thread.
        key = (gbnf, root)
        parsed = self._grammars.pop(key, None) or Gbnf(gbnf, root)
        self._grammars[key] = parsed
        while len(self._grammars) > 4:
            del self._grammars[next(iter(self._grammars))]
        return GbnfMatcher(parsed, self.tokenizer)

    def used_cells(self) -> int:
        return len(self._cells)


def fake_engine(
    script: Callable[[str], str] = echo_script,
    *,
    n_ctx: int = 8192,
    draft_miss_every: int | None = None,
    prefix_cache: PrefixCache | None = None,
    **kw,
) -> Scheduler:
    """A ready engine over the fake runtime, for tests and `whiz serve --model fake`.

    With `draft_miss_every`, a second fake, ten times cheaper, drafts for it as a draft model and
    guesses wrong at every n-th output position. `prefix_cache` keeps long prompts on disk.
    """
    runtime = FakeRuntime(script, n_ctx=n_ctx, **kw)
    info = EngineInfo(model="fake", n_ctx=n_ctx, n_ctx_train=n_ctx, n_seq_max=runtime.n_seq_max)
    draft = None
    if draft_miss_every is not None:
        small = FakeRuntime(script, n_ctx=n_ctx, **kw, miss_every=draft_miss_every)
        small.batch_costs_ms = {n: ms / 10 for n, ms in small.batch_costs_ms.items()}  # a small model
        draft = DraftModel(small, name="fake")
    return Scheduler(runtime, info, draft_model=draft, prefix_cache=prefix_cache)
