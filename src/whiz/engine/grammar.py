"""Sampling under a lazy grammar: free output until a trigger, then only tokens the grammar allows.

A `Constraint` follows one job's output token by token. While no trigger has fired it changes
nothing. Once one fires it asks the runtime's grammar matcher which tokens may come next and
samples among those: it checks the model's best few candidates first (its own choice is nearly
always allowed inside a call), and more of them, best first, only while the answer is not known.
Masking then sampling is a pure function of the logits, the grammar's state and the job's random
generator, so a speculative draft verified through `pick` yields exactly what plain decoding does.

The matcher runs on the engine thread, which every request shares, and its cost grows with the
grammar's ambiguity (a stack per way of reading the text, each checked against each candidate):
a whole-vocabulary check that takes 20 ms for a plain call grammar took seconds for a nested
anyOf. So each token's matching has a budget (`budget_ms`): candidates are checked in growing
batches, best first, each batch's cost predicted from the last; when the next one would pass the
budget, when matching took longer than it anyway, or when it averages over a quarter of it, the
request ends with `GrammarTooSlow`, which names the bound it passed: its client asked for a
constrained call, and output that quietly went on unconstrained would look like one and not be.
`dropped` says why, in the job's notes too.

The budget is looked at between matcher calls, and one call cannot be stopped halfway, so in the
engine each call runs off the engine thread under a deadline: a call past it ends the request with
`GrammarTooSlow` instead of holding every other stream. Over llama.cpp the calls run in a child
process that is killed past the deadline, so the work stops too (`grammar_process.py`); runtimes
that cannot build matchers in another process use the grammar thread (`grammar_thread.py`).
"""

from __future__ import annotations

import gc
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from whiz.engine.grammar_process import GrammarProcess
from whiz.engine.grammar_thread import GrammarThread, GrammarTooSlow, GrammarUnavailable
from whiz.engine.sampling import sample
from whiz.engine.types import LazyGrammar, SamplingParams
from whiz.seams import GrammarMatcher, Tokenizer

log = logging.getLogger("whiz.engine")

OPENING_WINDOW_BYTES = 64
"""How far into the output a call's opening (bare JSON) is looked for; past it, text stays free."""
_FIRST_LOOK = 32
"""Candidates checked, at temperature 0, before more are."""
_TIERS = (1024, 8192, 32768)
"""The next batches of candidates, best first, when none of the first few is allowed."""
_NEGLIGIBLE = 1e-6
"""Sampling over all tokens stops checking candidates once the unchecked ones together could
weigh no more than this share of the allowed ones: they would be drawn less than once in a
million tokens, and a whole-vocabulary check is the matcher's costliest call."""
_CHUNK = 16384
"""Most candidates checked in one matcher call, so that the budget is looked at in between."""
MATCH_BUDGET_MS = 200.0
"""Most milliseconds of grammar matching per token, in the engine thread's CPU time (about 3x
what a whole-vocabulary check of a plain call grammar costs on a busy 2-core CPU); past it the
grammar is dropped for that request."""
AVERAGE_WINDOW = 16
"""Tokens over which matching's average cost is watched: a grammar that costs just under the
budget on every token would slow every other stream down for the whole reply. Past a quarter of
the budget on average (a plain grammar averages a few ms), it is dropped too."""


class MatchingClock:
    """What matching costs: the calling thread's CPU time, less the garbage collections run on it.

    Wall time would charge a grammar for the machine's load (other processes on the cores, other
    threads holding the GIL): on a busy 2-core machine a legal grammar averaging 20 ms a token was
    measured past its 50 ms average and dropped. The matcher runs on the engine thread, so that
    thread's CPU time is its cost; what it makes other streams wait is the share's business
    (`grammar_share.py`). A garbage collection is not: Python runs one on whichever thread
    allocates when a threshold is passed, and a full one in a large heap takes hundreds of ms
    (517 ms measured for 3M objects), which would drop a grammar that costs a millisecond.

    `install()` hooks `gc.callbacks` to time the collections per thread (the scheduler installs
    one for its engine thread and removes it on close); not installed, the clock is the plain
    CPU time."""

    def __init__(self) -> None:
        self._local = threading.local()

    def __call__(self) -> float:
        return time.thread_time() - getattr(self._local, "collecting_s", 0.0)

    def install(self) -> MatchingClock:
        gc.callbacks.append(self._on_gc)
        return self

    def remove(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        local = self._local
        if phase == "start":
            local.started = time.thread_time()
        elif (started := getattr(local, "started", None)) is not None:
            local.collecting_s = getattr(local, "collecting_s", 0.0) + time.thread_time() - started
            local.started = None


class _OverBudget(Exception):
    """Matching this token would take longer than the budget."""


class _Clock:
    """The time one token's matching has spent, and a guess at what checking n candidates costs."""

    def __init__(self, budget_ms: float, now: Callable[[], float]):
        self.now = now
        self.budget_s = budget_ms / 1000
        self.t0 = now()
        self.per_id_s = 0.0
        """What one candidate cost in the largest call so far (a small call's fixed cost inflates it)."""
        self.largest = 0

    def spent_s(self) -> float:
        return self.now() - self.t0

    def check(self, matcher: GrammarMatcher, ids: np.ndarray) -> np.ndarray:
        """`matcher.allowed(ids)`, in chunks; raises _OverBudget before a chunk that would not fit."""
        out = []
        at = 0
        while at < len(ids):
            # Calls grow 32-fold from a small first one, each one's cost foretold by the last.
            chunk = ids[at : at + (min(_CHUNK, self.largest * 32) if self.largest else _FIRST_LOOK)]
            if self.spent_s() + self.per_id_s * len(chunk) > self.budget_s:
                raise _OverBudget
            t = self.now()
            out.append(matcher.allowed(chunk))
            if len(chunk) >= self.largest:
                self.per_id_s, self.largest = (self.now() - t) / len(chunk), len(chunk)
            at += len(chunk)
        if self.spent_s() > self.budget_s:
            raise _OverBudget
        return np.concatenate(out) if out else np.zeros(0, dtype=bool)


class Constraint:
    """One job's grammar state. `pick` chooses the next token; `accept` records the chosen one."""

    def __init__(
        self,
        grammar: LazyGrammar,
        tokenizer: Tokenizer,
        matcher_factory,
        *,
        budget_ms: float = MATCH_BUDGET_MS,
        notes: dict[str, str] | None = None,
        clock: Callable[[], float] | None = None,
        runner: GrammarThread | GrammarProcess | None = None,
    ):
        self.grammar = grammar
        self.tokenizer = tokenizer
        self._new_matcher = matcher_factory
        """(gbnf, root rule) -> GrammarMatcher."""
        self.budget_ms = budget_ms
        self.dropped: str | None = None
        """Why the grammar was let go before the output ended (None: it was not)."""
        self._notes = notes
        """Where `dropped` is written too: the job's stats, shown in the reply's `whiz` object."""
        own = clock or MatchingClock()
        self._runner = runner
        """Where matcher calls run (None: on the calling thread)."""
        self.clock = (lambda: own() + runner.cpu_s) if runner is not None else own
        """Seconds of matching (the budget's clock): the scheduler's installed `MatchingClock`, plus
        what the calls cost the grammar thread."""
        self._token_ms = 0.0
        """What matching the token being chosen has cost so far."""
        self._recent_ms: deque[float] = deque(maxlen=AVERAGE_WINDOW)
        self._opening = re.compile(grammar.opening.encode()) if grammar.opening else None
        self._tag = grammar.tag.encode() if grammar.tag else None
        self._out = bytearray()
        self._starts: list[int] = []
        """Byte offset in the output where each token starts."""
        self._tokens: list[int] = []
        self.matcher: GrammarMatcher | None = None
        self._mode: str | None = None
        self._looking_for_opening = self._opening is not None
        self.ended = False
        self._start = grammar.start
        """A rule that constrains from the first token: its matcher is built on first use, on the
        engine thread (building it costs time in proportion to the grammar)."""
        if grammar.start is not None:
            self._looking_for_opening = False

    @property
    def matching(self) -> bool:
        """Whether choosing the next token runs the matcher (engine time every request shares)."""
        return not self.ended and (self.matcher is not None or self._start is not None)

    def expected_ms(self) -> float:
        """What matching the next token should cost: the recent average, or, before any token
        was matched, the most a grammar may average (a quarter of the budget)."""
        if not self._recent_ms:
            return self.budget_ms / 4
        return sum(self._recent_ms) / len(self._recent_ms)

    # -- choosing a token -------------------------------------------------------------------

    def pick(self, logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
        """The next token: as `sample` would choose it, among the tokens the grammar allows.
        Raises `GrammarTooSlow` where a matcher call passed the grammar thread's deadline."""
        try:
            return self._pick(logits, params, rng)
        except GrammarTooSlow:
            self._off()  # the call still runs on its thread: this matcher is never touched again
            self.ended = True
            raise

    def _pick(self, logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
        self._begin()
        if self.matcher is None:
            return sample(logits, params, rng)
        clock = _Clock(self.budget_ms, self.clock)
        try:
            masked = self._masked(logits, params, clock)
            self._token_ms = clock.spent_s() * 1000
        except _OverBudget:
            self._drop(
                f"matching the tool-call grammar for one token would take more than {self.budget_ms:g} ms"
            )
        if masked is None:  # the grammar allows nothing: let the model go on unconstrained
            log.warning("the tool-call grammar allows no token here; the rest of the output is free")
            self._off()
            self.ended = True
            return sample(logits, params, rng)
        return sample(masked, params, rng)

    def _begin(self) -> None:
        """Switch on the rule that constrains from the first token, the first time it is needed."""
        if self._start is not None:
            root, self._start = self._start, None
            self._on(root, 0)

    def _count_average(self, token_ms: float) -> None:
        """Count one token's matching; past a quarter of the budget on average, end the request."""
        self._token_ms = 0.0
        self._recent_ms.append(token_ms)
        limit = self.budget_ms / 4
        if len(self._recent_ms) < AVERAGE_WINDOW or sum(self._recent_ms) / AVERAGE_WINDOW <= limit:
            return
        self._drop(
            f"matching the tool-call grammar took more than {limit:g} ms per token "
            f"over {AVERAGE_WINDOW} tokens"
        )

    def _drop(self, why: str) -> None:
        """End this request: matching its grammar costs everyone too much (`GrammarTooSlow`)."""
        log.warning("a request's tool-call grammar passed its budget: %s", why)
        self.dropped = "dropped: " + why
        if self._notes is not None:
            self._notes["grammar"] = self.dropped
        self._off()
        self.ended = True
        raise GrammarTooSlow(why)

    def _masked(self, logits: np.ndarray, params: SamplingParams, clock: _Clock) -> np.ndarray | None:
        """The logits with every token the grammar forbids at -inf (None when it allows none).

        Candidates are checked best first, in growing batches, until the answer is known: greedy,
        once one is allowed (the best allowed of all); top-k, among the model's k best where any is
        allowed, else once k are (the k best allowed); otherwise once what is left unchecked
        weighs less than `_NEGLIGIBLE` of what is allowed. A whole 152k vocabulary costs ~20-70 ms
        for a plain call grammar, a few candidates microseconds; each batch must fit `clock`."""
        assert self.matcher is not None
        n = logits.size
        top_k = params.top_k if 0 < params.top_k < n else n
        want = 1 if params.temperature <= 0 else top_k
        first = min(_FIRST_LOOK if params.temperature <= 0 or top_k == n else top_k, n)
        tiers = [first, *(t for t in _TIERS if first < t < n), n]
        found: list[np.ndarray] = []
        seen = np.zeros(n, dtype=bool)
        peak = float(logits.max())
        temperature = max(params.temperature, 1e-6)
        for i, size in enumerate(tiers):
            # The `size` best candidates, less those already checked.
            best = np.argpartition(logits, -size)[-size:] if size < n else np.arange(n)
            floor = float(logits[best].min())
            best = best[~seen[best]]
            seen[best] = True
            found.append(best[clock.check(self.matcher, best)])
            count = sum(len(f) for f in found)
            if not count or size == n:
                continue
            if want < n:
                # The first batch decides alone where it has anything (what plain top-k keeps).
                if i == 0 or count >= want:
                    break
                continue
            # Every unchecked token's logit is at most `floor`: bound their share of the mass.
            allowed = np.concatenate(found)
            mass = np.exp((logits[allowed].astype(np.float64) - peak) / temperature).sum()
            if (n - size) * np.exp((floor - peak) / temperature) <= _NEGLIGIBLE * mass:
                break
        ids = np.concatenate(found)
        if ids.size == 0:
            return None
        masked = np.full(n, -np.inf, dtype=np.float32)
        masked[ids] = logits[ids]
        return masked

    # -- following the output ---------------------------------------------------------------

    def accept(self, token: int) -> None:
        """Record a token of the output (one `pick` chose, or one the model wrote before a trigger).
        Raises `GrammarTooSlow` as `pick` does."""
        try:
            self._accept(token)
        except GrammarTooSlow:
            self._off()
            self.ended = True
            raise

    def _accept(self, token: int) -> None:
        self._begin()
        if self.ended:
            return
        if self.tokenizer.is_eog(token):
            self.ended = True
            return
        self._starts.append(len(self._out))
        self._tokens.append(token)
        self._out += self.tokenizer.piece(token)
        if self.matcher is not None:
            t0 = self.clock()
            self.matcher.accept(token)
            accept_ms = (self.clock() - t0) * 1000
            if accept_ms > self.budget_ms:
                self._drop(
                    f"matching the tool-call grammar for one token took more than {self.budget_ms:g} ms"
                )
            self._count_average(self._token_ms + accept_ms)
            if self._mode == "tagged" and self._complete():
                self._off()  # the call is closed: free text again, until the next tag
            return
        self._watch()

    def _watch(self) -> None:
        if self._looking_for_opening and self._opening is not None:
            if len(self._out.lstrip()) > OPENING_WINDOW_BYTES:
                self._looking_for_opening = False
            elif self._opening.match(self._out):
                self._looking_for_opening = False
                if self._on("opening", 0):
                    return
        if self._tag is not None and self._out.endswith(self._tag):
            start = len(self._out) - len(self._tag)
            if start in self._starts:  # the tag starts a token: the grammar can take it from there
                self._looking_for_opening = False
                self._on("tagged", self._starts.index(start))

    def _on(self, root: str, first: int) -> bool:
        """Switch the grammar on at rule `root`, replaying the output's tokens from `first` on.

        Those tokens were written freely; if the grammar refuses one, the model's text is not a
        call this grammar can finish, and the output stays free. Building the matcher and replaying
        count against one token's budget."""
        t0 = self.clock()
        try:
            if self._runner is None:
                matcher = self._new_matcher(self.grammar.gbnf, root)
            else:
                matcher = self._runner.matcher(self._new_matcher, self.grammar.gbnf, root)
        except (GrammarTooSlow, GrammarUnavailable):
            raise
        except Exception:
            log.exception("the tool-call grammar could not be built; tool calls are not constrained")
            self.ended = True
            return False
        for token in self._tokens[first:]:
            if not matcher.allowed(np.array([token]))[0]:
                return False
            matcher.accept(token)
        if (self.clock() - t0) * 1000 > self.budget_ms:
            self._drop(f"starting the tool-call grammar took more than {self.budget_ms:g} ms")
        self.matcher, self._mode = matcher, root
        return True

    def _complete(self) -> bool:
        return self.matcher is not None and self.matcher.can_end()

    def _off(self) -> None:
        self.matcher, self._mode = None, None
        self._out, self._starts, self._tokens = bytearray(), [], []
