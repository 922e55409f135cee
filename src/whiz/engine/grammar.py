"""Sampling under a lazy grammar: free output until a trigger, then only tokens the grammar allows.

A `Constraint` follows one job's output token by token. While no trigger has fired it changes
nothing. Once one fires it asks the runtime's grammar matcher which tokens may come next and
samples among those: it checks the model's best few candidates first (its own choice is nearly
always allowed inside a call) and the whole vocabulary only when none of them is allowed.
Masking then sampling is a pure function of the logits, the grammar's state and the job's random
generator, so a speculative draft verified through `pick` yields exactly what plain decoding does.
"""

from __future__ import annotations

import logging
import re

import numpy as np

from whiz.engine.sampling import sample
from whiz.engine.types import LazyGrammar, SamplingParams
from whiz.seams import GrammarMatcher, Tokenizer

log = logging.getLogger("whiz.engine")

OPENING_WINDOW_BYTES = 64
"""How far into the output a call's opening (bare JSON) is looked for; past it, text stays free."""
_FIRST_LOOK = 32
"""Candidates checked, at temperature 0, before the whole vocabulary is."""


class Constraint:
    """One job's grammar state. `pick` chooses the next token; `accept` records the chosen one."""

    def __init__(self, grammar: LazyGrammar, tokenizer: Tokenizer, matcher_factory):
        self.grammar = grammar
        self.tokenizer = tokenizer
        self._new_matcher = matcher_factory
        """(gbnf, root rule) -> GrammarMatcher."""
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
        if grammar.start is not None:
            self._looking_for_opening = False
            self._on(grammar.start, 0)

    # -- choosing a token -------------------------------------------------------------------

    def pick(self, logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
        """The next token: as `sample` would choose it, among the tokens the grammar allows."""
        if self.matcher is None:
            return sample(logits, params, rng)
        masked = self._masked(logits, params)
        if masked is None:  # the grammar allows nothing: let the model go on unconstrained
            log.warning("the tool-call grammar allows no token here; the rest of the output is free")
            self._off()
            self.ended = True
            return sample(logits, params, rng)
        return sample(masked, params, rng)

    def _masked(self, logits: np.ndarray, params: SamplingParams) -> np.ndarray | None:
        """The logits with every token the grammar forbids at -inf (None when it allows none).

        Greedy: the best allowed token, found among the best few when one of them is allowed (then
        it is the best allowed of all). Top-k sampling: among the model's k best, those allowed;
        only when none is, the k best of all the allowed ones. Checking a whole 152k vocabulary
        costs ~20 ms, a few candidates microseconds."""
        assert self.matcher is not None
        n = logits.size
        top_k = params.top_k if 0 < params.top_k < n else n
        look = min(_FIRST_LOOK, n) if params.temperature <= 0 else top_k
        best = np.argpartition(logits, -look)[-look:] if look < n else np.arange(n)
        ok = self.matcher.allowed(best)
        if not ok.any() and look < n:
            best = np.arange(n)
            ok = self.matcher.allowed(best)
        ids = best[ok]
        if ids.size == 0:
            return None
        masked = np.full(n, -np.inf, dtype=np.float32)
        masked[ids] = logits[ids]
        return masked

    # -- following the output ---------------------------------------------------------------

    def accept(self, token: int) -> None:
        """Record a token of the output (one `pick` chose, or one the model wrote before a trigger)."""
        if self.ended:
            return
        if self.tokenizer.is_eog(token):
            self.ended = True
            return
        self._starts.append(len(self._out))
        self._tokens.append(token)
        self._out += self.tokenizer.piece(token)
        if self.matcher is not None:
            self.matcher.accept(token)
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
        call this grammar can finish, and the output stays free."""
        try:
            matcher = self._new_matcher(self.grammar.gbnf, root)
        except Exception:
            log.exception("the tool-call grammar could not be built; tool calls are not constrained")
            self.ended = True
            return False
        for token in self._tokens[first:]:
            if not matcher.allowed(np.array([token]))[0]:
                return False
            matcher.accept(token)
        self.matcher, self._mode = matcher, root
        return True

    def _complete(self) -> bool:
        return self.matcher is not None and self.matcher.can_end()

    def _off(self) -> None:
        self.matcher, self._mode = None, None
        self._out, self._starts, self._tokens = bytearray(), [], []
