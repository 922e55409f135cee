"""Grammar matching in a child process, killed when one call passes its deadline.

A matcher call is one call into llama.cpp's grammar code, and nothing stops a C call halfway. On a
thread (`grammar_thread.py`) a call past its deadline could only be let go: it went on holding a
core until it returned, which for a grammar whose readings double with every token may be never,
and once a few were let go every later grammar request had to be refused. A hostile client could
so take tool calls from everyone. Here every matcher lives in one child process; the engine thread
sends it each call and waits at most `deadline_ms`. Past it the child is killed, which stops the
work at once and gives its core back, the request ends with `GrammarTooSlow` saying so, and a
spare child (started beforehand, so no request waits for an interpreter to start) takes the next
calls.

The other requests' matchers died with the child. Each remote matcher keeps the tokens it accepted,
so it is built again in the new child and replayed there on its next call, under the same deadline.
Matching is a pure function of the grammar and those tokens, so the replayed matcher allows exactly
what the lost one would have.

What each call cost the child in CPU time is added up in `cpu_s`, which the per-token budget in
`grammar.py` reads, as it reads the thread's.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from whiz.engine.grammar_thread import DEADLINE_MS, GrammarTooSlow, GrammarUnavailable
from whiz.errors import EngineError
from whiz.seams import GrammarMatcher

log = logging.getLogger("whiz.engine")

MatcherSpec = Callable[[], Callable[[str, str], GrammarMatcher]]
"""Run in the child (so picklable: a module-level function or a partial of one): what builds a
matcher from (GBNF, root rule) there, a vocabulary loaded once."""

START_TIMEOUT_S = 120.0
"""Longest a child may take to start (import llama.cpp, read the vocabulary) before it counts as
failed; only the request that needs it waits, and only for the rest of one deadline."""


def _serve(conn, spec: MatcherSpec) -> None:
    """The child: build matchers and answer calls on them, one at a time, until the pipe closes."""
    factory = spec()
    matchers: dict[int, GrammarMatcher] = {}
    conn.send(("ready", os.getpid()))
    while True:
        try:
            op, key, arg = conn.recv()
        except (EOFError, OSError):
            return
        if op == "free":
            matchers.pop(key, None)
            continue
        t0 = time.process_time()
        try:
            if op == "build":
                gbnf, root, tokens = arg
                matcher = factory(gbnf, root)
                for token in tokens:
                    matcher.accept(token)
                matchers[key], value = matcher, None
            elif op == "allowed":
                value = matchers[key].allowed(arg)
            elif op == "accept":
                value = matchers[key].accept(arg)
            else:
                value = matchers[key].can_end()
            reply = (True, value)
        except Exception as exc:
            reply = (False, EngineError(str(exc) or type(exc).__name__))
        conn.send((*reply, time.process_time() - t0))


def _context(spec: MatcherSpec):
    """Children forked from a fork server: a clean process (this one's threads may hold locks, so
    it is never forked itself) with this module and the spec's imported once, so that a spare
    starts in milliseconds, not in the interpreter's start-up time. The main module too: each
    child would import it again otherwise (for the `whiz` script, the whole CLI)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["__main__", __name__, getattr(spec, "func", spec).__module__])
    return ctx


class _Child:
    def __init__(self, spec: MatcherSpec, number: int):
        ctx = _context(spec)
        self.conn, theirs = ctx.Pipe()
        self.number = number
        self.process = ctx.Process(target=_serve, args=(theirs, spec), name="whiz-grammar", daemon=True)
        self.process.start()
        theirs.close()
        self.started = time.monotonic()
        self.ready = False

    def wait_ready(self, timeout_s: float) -> bool:
        if not self.ready and self.conn.poll(timeout_s):
            try:
                self.ready = self.conn.recv()[0] == "ready"
            except (EOFError, OSError):
                return False
        return self.ready

    def kill(self) -> None:
        self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()


class GrammarProcess:
    """Matchers in a child process under a deadline: `matcher(factory, gbnf, root)` builds one
    there (`factory` is the thread's way; here `spec` builds it in the child)."""

    def __init__(self, spec: MatcherSpec, *, deadline_ms: float = DEADLINE_MS):
        self.spec = spec
        self.deadline_ms = deadline_ms
        self.cpu_s = 0.0
        """CPU time the calls that returned cost the child, in all."""
        self.timeouts = 0
        """Calls that passed their deadline (their child killed), in all."""
        self.abandoned = 0
        """Calls past their deadline still running: none, ever (kept for what reads a runner)."""
        self.pids: list[int] = []
        """Every child started, in order (for the tests: all but the last are gone)."""
        self._numbers = itertools.count()
        self._keys = itertools.count()
        self._freed: deque[int] = deque()
        """Keys of matchers collected since the last call, freed in the child on the next one."""
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._spare: _Child | None = None
        self._closed = False
        self._start_spare()

    # -- what a Constraint calls ----------------------------------------------------------------

    def matcher(self, factory: Any, gbnf: str, root: str) -> _RemoteMatcher:
        return _RemoteMatcher(self, gbnf, root)

    def generation(self) -> int:
        """Which child holds the matchers now (a new number after each kill)."""
        return -1 if self._child is None else self._child.number

    def ask(self, op: str, key: int, arg: Any) -> Any:
        with self._lock:
            child = self._current()
            while self._freed:
                child.conn.send(("free", self._freed.popleft(), None))
            child.conn.send((op, key, arg))
            if not child.conn.poll(self.deadline_ms / 1000):
                self.timeouts += 1
                self._replace(child)
                raise GrammarTooSlow(
                    f"matching the tool-call grammar took more than {self.deadline_ms:g} ms for one call, "
                    "so that work was stopped (its process killed)"
                )
            try:
                ok, value, cpu_s = child.conn.recv()
            except (EOFError, OSError):
                self._replace(child)
                raise GrammarUnavailable(
                    "the grammar matcher's process ended in the middle of a call (llama.cpp aborted on "
                    "this grammar?); it was started again, retry the request"
                ) from None
        self.cpu_s += cpu_s
        if ok:
            return value
        raise value

    def wait_spare(self, timeout_s: float) -> bool:
        """Wait until a child stands ready to take the next calls (for tests and a server's start)."""
        with self._lock:
            if self._child is None and self._spare is None:
                self._start_spare()
            child = self._child or self._spare
            assert child is not None
        return child.wait_ready(timeout_s)

    def free(self, key: int) -> None:
        self._freed.append(key)  # from a finalizer, on any thread: sent by the next call

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for child in (self._child, self._spare):
                if child is not None:
                    child.kill()
            self._child = self._spare = None

    # -- children ---------------------------------------------------------------------------------

    def _start_spare(self) -> None:
        if not self._closed:
            self._spare = _Child(self.spec, next(self._numbers))
            self.pids.append(self._spare.process.pid)

    def _current(self) -> _Child:
        """The child that takes calls: the one running, else the spare, and a new spare behind it.

        The first child is waited for as long as a start may take (a server's first tool call,
        once); a spare after a kill, at most one deadline, since the engine thread waits meanwhile:
        it was started when the last child was promoted, so it is nearly always ready."""
        if self._child is not None:
            return self._child
        if self._spare is None:
            self._start_spare()
        spare = self._spare
        assert spare is not None
        first = self.timeouts == 0 and len(self.pids) <= 2
        if not spare.wait_ready(START_TIMEOUT_S if first else max(self.deadline_ms / 1000, 0.001)):
            if spare.process.is_alive() and time.monotonic() - spare.started < START_TIMEOUT_S:
                raise GrammarUnavailable(
                    "grammar matching is starting again after another request's grammar was stopped; "
                    "retry the request"
                )
            spare.kill()
            self._spare = None
            raise GrammarUnavailable("the grammar matcher's process could not start; retry the request")
        self._child, self._spare = spare, None
        self._start_spare()
        return self._child

    def _replace(self, child: _Child) -> None:
        child.kill()
        if self._child is child:
            self._child = None


class _RemoteMatcher:
    """A matcher in the child, built again there (and its tokens replayed) if that child was
    killed since its last call."""

    def __init__(self, host: GrammarProcess, gbnf: str, root: str):
        self.host, self.gbnf, self.root = host, gbnf, root
        self.key = next(host._keys)
        self.tokens: list[int] = []
        self.lives_in = -2
        self._ensure()

    def _ensure(self) -> None:
        if self.lives_in != self.host.generation():
            self.host.ask("build", self.key, (self.gbnf, self.root, self.tokens))
            self.lives_in = self.host.generation()

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        self._ensure()
        return self.host.ask("allowed", self.key, ids)

    def accept(self, token: int) -> None:
        self._ensure()
        self.host.ask("accept", self.key, int(token))
        self.tokens.append(int(token))

    def can_end(self) -> bool:
        self._ensure()
        return self.host.ask("can_end", self.key, None)

    def __del__(self) -> None:
        if self.lives_in >= 0:
            self.host.free(self.key)
