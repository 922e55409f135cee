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


class _Cell:
    """One KV cell: a token and the sequences that share it (its position is its key)."""

    __slots__ = ("tok", "seqs")

    def __init__(self, tok: int, seqs: set[int]):
        self.tok, self.seqs = tok, seqs


class _Seq:
    """A sequence's tokens in position order, their bytes, and where each token's bytes end."""

    __slots__ = ("tokens", "text", "ends")

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.text = bytearray()
        self.ends: list[int] = []

    def append(self, token: int, piece: bytes) -> None:
        self.tokens.append(token)
        self.text += piece
        self.ends.append(len(self.text))

    def cut(self, pos: int) -> None:
        """Keep the tokens before position `pos`."""
        del self.tokens[pos:], self.text[self.ends[pos - 1] if pos else 0 :], self.ends[pos:]


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
        # Each sequence's cells by position; a cell is shared by the sequences in its `seqs` and
        # counts once against `n_ctx`.
        self._kv: dict[int, dict[int, _Cell]] = {}
        self._used = 0
        # Each sequence's tokens in position order and their text, kept from one step to the next
        # and cut back where its tail is removed (a draft's rejected tokens), rebuilt from the
        # cells only where they change otherwise: rebuilding them, or walking every cell, at
        # every step made a reply cost time quadratic in the prompt's length.
        self._seqs: dict[int, _Seq] = {}
        self._history_text: tuple[list[int] | None, int, bytearray, int] = (None, 0, bytearray(), 0)
        """The history `decode` is about to ask `_logits` about, its length, and the buffer of its
        bytes with their length then (subclasses that override `_logits` take the history alone)."""
        self.decoded_tokens = 0
        self.decode_calls = 0
        self.restored_tokens = 0
        self.shifted_tokens = 0
        self._grammars: dict[tuple[str, str], Gbnf] = {}
        """The last few grammars parsed, newest last."""

    def _seq(self, seq: int) -> _Seq:
        """The sequence's tokens in position order and their bytes (not to be changed by the caller)."""
        if (kept := self._seqs.get(seq)) is not None:
            return kept
        cells = self._kv.get(seq, {})
        positions = sorted(cells)
        if positions and positions[-1] != len(positions) - 1:
            raise EngineError(f"sequence {seq} has a gap in its positions")
        kept = self._seqs[seq] = _Seq()
        for pos in positions:
            kept.append(cells[pos].tok, self.tokenizer.piece(cells[pos].tok))
        return kept

    def _tokens(self, seq: int) -> list[int]:
        """The sequence's tokens in position order (not to be changed by the caller)."""
        return self._seq(seq).tokens

    def decode(self, rows: Sequence[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        if self._used + len(rows) > self.n_ctx:
            raise KVCacheFull("the fake KV cache is full")
        follows: dict[int, int] = {}
        for _token, pos, seq, _wants in rows:  # the whole batch is checked before any of it is kept
            held = follows.get(seq, len(self._tokens(seq)))
            if pos != held:
                raise EngineError(f"sequence {seq}: position {pos} does not follow {held} cells")
            follows[seq] = held + 1
        outputs = []
        for token, pos, seq, wants in rows:
            held = self._seq(seq)
            held.append(token, self.tokenizer.piece(token))
            self._kv.setdefault(seq, {})[pos] = _Cell(token, {seq})
            self._used += 1
            if wants:
                self._history_text = (held.tokens, len(held.tokens), held.text, len(held.text))
                outputs.append(self._logits(held.tokens))
        self.decoded_tokens += len(rows)
        self.decode_calls += 1
        time.sleep(self.step_s + self.token_s * len(rows))
        return outputs

    def _logits(self, history: list[int]) -> np.ndarray:
        """The next token's logits after a sequence's whole `history`."""
        kept, length, text, size = self._history_text
        if kept is not history or length != len(history):
            text = bytearray(b"".join(self.tokenizer.piece(t) for t in history))
            size = len(text)
        cut = text.rfind(_ASSISTANT, 0, size)
        logits = np.zeros(self.n_vocab, dtype=np.float32)
        nxt = self.tokenizer.im_end
        if cut >= 0:
            reply = self.script(text[:cut].decode(errors="replace")).encode()
            written = bytes(text[cut + len(_ASSISTANT) : size])
            if reply.startswith(written) and len(written) < len(reply):
                nxt = reply[len(written)]
                if self.miss_every and len(written) % self.miss_every == self.miss_every - 1:
                    nxt = ord("?") if nxt != ord("?") else ord("!")
        logits[nxt] = self.confidence
        return logits

    def _positions(self, seq: int, p0: int, p1: int) -> list[int]:
        """The sequence's positions in [p0, p1) (p1 < 0: to its end)."""
        cells = self._kv.get(seq)
        if not cells:
            return []
        end = p1 if p1 >= 0 else None
        if (held := self._seqs.get(seq)) is not None:  # positions 0..n-1: no need to look at each
            top = len(held.tokens) if end is None else min(end, len(held.tokens))
            return list(range(max(p0, 0), top))
        return [pos for pos in cells if pos >= p0 and (end is None or pos < end)]

    def _drop(self, seq: int, pos: int) -> _Cell:
        cell = self._kv[seq].pop(pos)
        cell.seqs.discard(seq)
        if not cell.seqs:
            self._used -= 1
        return cell

    def seq_rm(self, seq: int, p0: int, p1: int) -> None:
        positions = self._positions(seq, p0, p1)
        for pos in positions:
            self._drop(seq, pos)
        held = self._seqs.get(seq)
        if held is not None and positions and positions[-1] == len(held.tokens) - 1:
            held.cut(positions[0])  # its tail: what is left still runs 0..n-1
        elif positions:
            self._seqs.pop(seq, None)

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        cells = self._kv.get(src, {})
        into = self._kv.setdefault(dst, {})
        for pos in self._positions(src, p0, p1):
            cell = cells[pos]
            if dst not in cell.seqs:
                if pos in into:
                    self._drop(dst, pos)
                cell.seqs.add(dst)
                into[pos] = cell
        self._seqs.pop(dst, None)

    can_shift = True

    def seq_add(self, seq: int, p0: int, p1: int, delta: int) -> None:
        moved = [(pos, self._drop(seq, pos).tok) for pos in self._positions(seq, p0, p1)]
        # Another sequence sharing a cell keeps it where it was; this one gets a cell of its own.
        cells = self._kv.setdefault(seq, {})
        for pos, tok in moved:
            cells[pos + delta] = _Cell(tok, {seq})
            self._used += 1
        self.shifted_tokens += len(moved)
        self._seqs.pop(seq, None)

    def seq_state_get(self, seq: int) -> bytearray:
        """The sequence's tokens, in position order: all the state the fake's "model" has."""
        return bytearray(_FAKE_STATE + np.array(self._tokens(seq), dtype="<i4").tobytes())

    def seq_state_set(self, seq: int, data: bytearray) -> None:
        self.seq_rm(seq, 0, -1)
        body = bytes(data)
        if not body.startswith(_FAKE_STATE) or (len(body) - len(_FAKE_STATE)) % 4:
            raise EngineError(f"not a fake sequence state ({len(body)} bytes)")
        tokens = np.frombuffer(body[len(_FAKE_STATE) :], dtype="<i4")
        if self._used + len(tokens) > self.n_ctx:
            raise KVCacheFull("the fake KV cache is full")
        cells = self._kv.setdefault(seq, {})
        held = self._seqs[seq] = _Seq()
        for pos, tok in enumerate(tokens.tolist()):
            cells[pos] = _Cell(tok, {seq})
            held.append(tok, self.tokenizer.piece(tok))
        self._used += len(tokens)
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
        return self._used


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
