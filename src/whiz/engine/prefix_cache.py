"""The prefix cache on disk: long prompts' KV cells, kept across server restarts.

Prefilling Codex's 6k-token first turn costs over a minute on a small CPU, and a restart used to
pay it again. When a slot has just prefilled a prompt of at least `min_tokens` that the disk does
not already hold (to within `min_tokens`), its sequence's state is copied out on the worker thread
(tens of milliseconds) and written by a writer thread. A prompt that adds at least `EXTEND_TOKENS`
to the end of the entry it shares most with is saved too (an agent's next request: Codex's turn
adds ~700 tokens to its warm-up); when that entry was itself such a short step, the new one
replaces it, so a conversation growing in short steps leaves a file per `min_tokens` of growth and
one at its tip, not one per step.

A later request, in this process or the next, whose prompt shares more with a file than with any
slot in memory waits while a reader thread loads and checks the file, then has it restored into its
slot instead of prefilling.

Finding the longest stored prefix is cheap: every entry is indexed under the chained hash of each
of its whole 256-token blocks, a prompt's block hashes are computed once, and the longest block
hash found names the candidates; their tokens (kept in memory, 4 bytes each) give the exact match.

The folder is bounded in bytes, least recently used first out (a restore refreshes a file's
mtime), counting every file in it (other models' too, since servers of several models may share
it), and nothing is written when the disk is short of room. Entries of another model, build or
cache layout carry another fingerprint and are never restored; damaged ones are deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from whiz.engine import kv_file
from whiz.engine.kv_identity import fingerprint
from whiz.engine.slots import Placement, common_prefix
from whiz.errors import KVCacheFull

log = logging.getLogger("whiz.prefix_cache")

BLOCK_TOKENS = 256
EXTEND_TOKENS = BLOCK_TOKENS
"""Fewest new tokens a prompt that extends a saved entry must add to be saved as well: less than a
block would not be restored anyway (a restore must save a block of prefill)."""
GB = 1024**3
FREE_SPACE_SPARE_BYTES = GB
"""Writes leave the disk at least this much, plus twice the entry."""
MAX_PENDING_WRITES = 2
"""States held in memory for the writer; more are skipped, not queued (each may be ~100 MB)."""
STALE_TMP_S = 600
"""A temporary file this old belongs to a writer that died mid-write."""


class StateRuntime(Protocol):
    """What the prefix cache needs from a runtime, beyond the `Runtime` seam."""

    def seq_state_get(self, seq: int) -> bytearray: ...

    def seq_state_set(self, seq: int, data: bytearray) -> None: ...

    def seq_rm(self, seq: int, p0: int, p1: int) -> None: ...


def scope_of(tenant: str | None) -> str:
    """What a tenant's entries are filed under: a hash, so no API key or name reaches the disk."""
    return "" if tenant is None else hashlib.sha256(tenant.encode()).hexdigest()[:32]


def block_hashes(tokens: list[int] | np.ndarray, scope: str = "") -> list[bytes]:
    """The chained hash of each whole block: entry k covers tokens [0, (k+1) * BLOCK_TOKENS).

    The chain starts from the scope, so one tenant's prompts never match another's entries.
    """
    arr = np.asarray(tokens, dtype="<i4")
    out: list[bytes] = []
    h = scope.encode()
    for k in range(len(arr) // BLOCK_TOKENS):
        block = arr[k * BLOCK_TOKENS : (k + 1) * BLOCK_TOKENS].tobytes()
        h = hashlib.blake2b(h + block, digest_size=16).digest()
        out.append(h)
    return out


@dataclass
class Entry:
    """One file of this engine's fingerprint: its tokens, and whether it may be read yet."""

    name: str
    tokens: np.ndarray
    scope: str
    header: kv_file.KVHeader | None = None
    """None while the writer has not finished it."""
    blocks: list[bytes] = field(default_factory=list)


class PrefixCache:
    """The disk side of prefix reuse for one engine (one model, build and cache layout)."""

    def __init__(
        self,
        directory: Path,
        identity: dict,
        *,
        max_bytes: int = 4 * GB,
        min_tokens: int = 1024,
        max_entry_tokens: int | None = None,
    ):
        """`identity` names what the states belong to (kv_identity); `max_entry_tokens` is the
        longest sequence the runtime can hold, so longer entries (from a bigger context) are skipped."""
        self.dir = directory
        self.identity = identity
        self.fingerprint = fingerprint(identity)
        self.max_bytes = max_bytes
        self.min_tokens = max(min_tokens, BLOCK_TOKENS)
        self.max_entry_tokens = max_entry_tokens
        self._lock = threading.Lock()  # the index: the worker reads it, the writer updates it
        self._entries: dict[str, Entry] = {}
        self._by_block: dict[bytes, set[str]] = {}
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="whiz-kv-write")
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="whiz-kv-read")
        self._loading: dict[str, Future] = {}
        self._pending_writes = 0
        self._replaced: set[str] = set()
        """Entries a pending write will replace: no longer a step another entry is measured from."""
        self._last_prompt: tuple[list[int] | None, str, list[bytes]] = (None, "", [])
        self._closed = False
        self.saves = 0
        self.restores = 0
        self.restored_tokens = 0
        self.dir.mkdir(parents=True, exist_ok=True)
        self._scan()

    # -- the index ------------------------------------------------------------------------------

    def _scan(self) -> None:
        """Index this fingerprint's files; delete damaged ones and stale temporaries."""
        now = time.time()
        for path in self.dir.iterdir():
            if path.name.startswith(".tmp-"):
                with contextlib.suppress(OSError):
                    if now - path.stat().st_mtime > STALE_TMP_S:
                        path.unlink()
                continue
            if path.suffix != kv_file.SUFFIX or not path.name.startswith(self.fingerprint + "-"):
                continue  # another engine's entry: left for it, counted against the size bound
            try:
                header = kv_file.read_header(path)
                if header.fingerprint != self.fingerprint or header.identity != self.identity:
                    raise kv_file.BadKVFile("made by another model, build or cache layout")
            except kv_file.BadKVFile as exc:
                self._discard(path.name, f"{exc}")
                continue
            self._add(Entry(path.name, header.tokens, header.scope, header))

    def _add(self, entry: Entry) -> None:
        entry.blocks = block_hashes(entry.tokens, entry.scope)
        with self._lock:
            self._entries[entry.name] = entry
            for h in entry.blocks:
                self._by_block.setdefault(h, set()).add(entry.name)

    def _drop(self, name: str) -> None:
        with self._lock:
            entry = self._entries.pop(name, None)
            if entry is not None:
                for h in entry.blocks:
                    names = self._by_block.get(h)
                    if names is not None:
                        names.discard(name)
                        if not names:
                            del self._by_block[h]

    def _discard(self, name: str, why: str) -> None:
        log.warning("prefix cache: discarding %s: %s", name, why)
        self._drop(name)
        with contextlib.suppress(OSError):
            (self.dir / name).unlink()

    def _prompt_blocks(self, prompt: list[int], scope: str) -> list[bytes]:
        # A waiting request asks again every admit pass: hash its prompt once.
        last, last_scope, blocks = self._last_prompt
        if last is not prompt or last_scope != scope:
            blocks = block_hashes(prompt, scope)
            self._last_prompt = (prompt, scope, blocks)
        return blocks

    def longest(
        self, prompt: list[int], *, tenant: str | None = None, written_only: bool = True
    ) -> tuple[Entry, int] | None:
        """The entry sharing the longest prefix with `prompt`, and that length (None: no block matches)."""
        blocks = self._prompt_blocks(prompt, scope_of(tenant))
        with self._lock:
            for k in range(len(blocks) - 1, -1, -1):
                names = self._by_block.get(blocks[k])
                if not names:
                    continue
                entries = [
                    e
                    for e in (self._entries[n] for n in names)
                    if (e.header is not None or not written_only)
                    and (self.max_entry_tokens is None or len(e.tokens) <= self.max_entry_tokens)
                ]
                if not entries:
                    continue
                # Longest match first; of those, the smallest file (the cheapest read).
                scored = [(common_prefix(e.tokens.tolist(), prompt), -len(e.tokens), e) for e in entries]
                lcp, _, entry = max(scored, key=lambda s: (s[0], s[1]))
                return entry, lcp
        return None

    # -- saving (worker thread, then the writer) -----------------------------------------------------

    def prompt_prefilled(
        self, runtime: StateRuntime, seq: int, tokens: list[int], *, tenant: str | None = None
    ) -> None:
        """A slot's cache holds exactly `tokens`, just prefilled: save them if the disk lacks them.

        `tenant` (an API key, say) files the entry where only that tenant's prompts find it.
        """
        if len(tokens) < self.min_tokens or self._closed:
            return
        if self.max_entry_tokens is not None and len(tokens) > self.max_entry_tokens:
            return
        found = self.longest(tokens, tenant=tenant, written_only=False)
        replaces = None
        if found is not None and len(tokens) - found[1] < self.min_tokens:
            base, shared = found
            if shared < len(base.tokens) or len(tokens) - shared < EXTEND_TOKENS:
                return  # the disk already holds nearly all of it
            # A short step past a saved prompt: the whole of what a restarted server is likely sent
            # again. Keep it, but let it replace a short step it extends: one near-copy per chain.
            if self._short_step(base):
                replaces = base.name
        if self._pending_writes >= MAX_PENDING_WRITES:
            log.info("prefix cache: the writer is behind; not saving a %d-token prefix", len(tokens))
            return
        arr = np.asarray(tokens, dtype="<i4")
        scope = scope_of(tenant)
        digest = hashlib.sha256(scope.encode() + arr.tobytes()).hexdigest()[:24]
        name = f"{self.fingerprint}-{digest}{kv_file.SUFFIX}"
        try:
            data = runtime.seq_state_get(seq)
        except Exception as exc:  # a cache that can't save must not fail the request
            log.warning("prefix cache: could not copy sequence %d's state: %s", seq, exc)
            return
        self._add(Entry(name, arr, scope))
        with self._lock:
            self._pending_writes += 1
            if replaces is not None:
                self._replaced.add(replaces)
        self.saves += 1
        self._writer.submit(self._write, name, arr, scope, data, replaces)

    def _short_step(self, entry: Entry) -> bool:
        """Whether `entry` extends another entry whole by fewer than `min_tokens` tokens."""
        mine = entry.tokens.tolist()
        with self._lock:
            names = set().union(*(self._by_block.get(h, set()) for h in entry.blocks))
            names -= {entry.name, *self._replaced}
            others = [self._entries[n].tokens for n in names]
        return any(
            len(other) < len(mine)
            and len(mine) - len(other) < self.min_tokens
            and common_prefix(other.tolist(), mine) == len(other)
            for other in others
        )

    def _write(
        self, name: str, tokens: np.ndarray, scope: str, data: bytearray, replaces: str | None = None
    ) -> None:
        try:
            size_estimate = len(data) + 4 * len(tokens) + 4096
            if size_estimate > self.max_bytes:
                raise OSError(f"{size_estimate} bytes exceed the cache's bound of {self.max_bytes}")
            free = shutil.disk_usage(self.dir).free
            if free < 2 * size_estimate + FREE_SPACE_SPARE_BYTES:
                raise OSError(f"only {free / GB:.1f} GB free on the disk")
            self._make_room(size_estimate)
            path = self.dir / name
            kv_file.write(
                path,
                fingerprint=self.fingerprint,
                identity=self.identity,
                scope=scope,
                tokens=tokens,
                data=data,
            )
            header = kv_file.read_header(path)
            with self._lock:
                if name in self._entries:
                    self._entries[name].header = header
            log.info("prefix cache: saved %d tokens (%.0f MB)", len(tokens), len(data) / 2**20)
            if replaces is not None:
                # It holds all of the entry it extends; that one is only a smaller read now.
                self._drop(replaces)
                with contextlib.suppress(OSError):
                    (self.dir / replaces).unlink()
        except (OSError, kv_file.BadKVFile) as exc:
            log.warning("prefix cache: not saving a %d-token prefix: %s", len(tokens), exc)
            self._drop(name)
        finally:
            with self._lock:
                self._pending_writes -= 1
                self._replaced.discard(replaces)

    def _make_room(self, incoming: int) -> None:
        """Delete the least recently used files until `incoming` more bytes fit the bound."""
        files = []
        for path in self.dir.glob("*" + kv_file.SUFFIX):
            if path.name.startswith(".tmp-"):
                continue  # a write under way, perhaps another process's
            with contextlib.suppress(OSError):
                st = path.stat()
                files.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files, key=lambda f: f[0]):
            if total + incoming <= self.max_bytes:
                break
            self._drop(path.name)
            with contextlib.suppress(OSError):
                path.unlink()
            total -= size
            log.info("prefix cache: evicted %s (least recently used)", path.name)

    # -- restoring (worker thread, the reader loads) ------------------------------------------

    def improve(
        self,
        runtime: StateRuntime,
        prompt: list[int],
        placement: Placement,
        *,
        need_logits: bool,
        tenant: str | None = None,
    ) -> Placement | None:
        """`placement`, or a better one whose slot now holds a prefix restored from disk.

        None means a file worth restoring is being read: ask again on a later pass. A restore
        is worth it when it saves at least a block of prefill over what memory already gives.
        Only entries `tenant` saved are candidates.
        """
        found = self.longest(prompt, tenant=tenant)
        if found is None:
            return placement
        entry, lcp = found
        if need_logits:
            lcp = min(lcp, len(prompt) - 1)  # the last prompt token is decoded again for its logits
        if lcp < placement.keep + BLOCK_TOKENS:
            return placement
        future = self._loading.get(entry.name)
        if future is None:
            for name in [n for n, f in self._loading.items() if f.done()]:
                del self._loading[name]  # loaded for a request that went away
            self._loading[entry.name] = self._reader.submit(self._load, entry)
            return None
        if not future.done():
            return None
        del self._loading[entry.name]
        data = future.result()
        if data is None:
            return placement  # damaged and discarded; the reader said why
        slot = placement.slot
        try:
            runtime.seq_state_set(slot.seq, data)
            runtime.seq_rm(slot.seq, lcp, -1)
        except Exception as exc:
            if not isinstance(exc, KVCacheFull):  # a state llama.cpp refuses is never offered again
                self._discard(entry.name, f"the runtime refused it ({exc})")
            runtime.seq_rm(slot.seq, 0, -1)
            slot.tokens = []
            # The slot's own cells are gone; a donor's are still there to copy.
            return Placement(slot=slot, keep=placement.keep if placement.donor else 0, donor=placement.donor)
        slot.tokens = prompt[:lcp]
        self.restores += 1
        self.restored_tokens += lcp
        log.info("prefix cache: restored %d of %d prompt tokens from disk", lcp, len(prompt))
        return Placement(slot=slot, keep=lcp)

    def _load(self, entry: Entry) -> bytearray | None:
        path = self.dir / entry.name
        try:
            data = kv_file.read_data(path, entry.header)
        except kv_file.BadKVFile as exc:
            self._discard(entry.name, str(exc))
            return None
        with contextlib.suppress(OSError):
            path.touch()  # least recently used is by mtime, shared with other processes
        return data

    # -- the rest -------------------------------------------------------------------------------

    def status(self) -> dict:
        """Counters for /metrics."""
        with self._lock:
            n = sum(1 for e in self._entries.values() if e.header is not None)
        return {
            "prefix_cache_entries": n,
            "prefix_cache_saves": self.saves,
            "prefix_cache_restores": self.restores,
            "prefix_cache_restored_tokens": self.restored_tokens,
        }

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for the writes under way (a restart right after a long prefill should find them)."""
        if not self._closed:
            self._writer.submit(lambda: None).result(timeout_s)

    def close(self, timeout_s: float = 30.0) -> None:
        """Finish the writes under way, then stop the reader and writer threads."""
        if self._closed:
            return
        self.flush(timeout_s)
        self._closed = True
        self._writer.shutdown(wait=False, cancel_futures=True)
        self._reader.shutdown(wait=False, cancel_futures=True)
