"""Token ids back to text while streaming, with stop strings.

A character can span several tokens, so bytes are decoded incrementally and only whole
characters are released. Text that might be the start of a stop string is held back until it
is clearly not one, so a stop string never leaks into the output.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence

from whiz.seams import Tokenizer


class Detokenizer:
    def __init__(self, tokenizer: Tokenizer, stop: Sequence[str] = ()):
        self._tokenizer = tokenizer
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = [s for s in stop if s]
        self._held = ""
        self.stopped = False

    def feed(self, token: int) -> str:
        """Add one token; return the text that is now safe to show."""
        if self.stopped:
            return ""
        self._held += self._decoder.decode(self._tokenizer.piece(token))
        return self._release()

    def _release(self) -> str:
        # Cut at the earliest match: one token can complete two stops that start at different places.
        hits = [at for s in self._stop if (at := self._held.find(s)) >= 0]
        if hits:
            out, self._held, self.stopped = self._held[: min(hits)], "", True
            return out
        keep = 0
        for s in self._stop:
            # Hold the longest end of the text that could still grow into `s`: try only the places
            # where `s` could begin, earliest (longest) first. This runs on the event loop for
            # every token, so it costs a `find` per stop, not a comparison per prefix length.
            at = self._held.find(s[0], max(0, len(self._held) - len(s) + 1))
            while at >= 0:
                if s.startswith(self._held[at:]):
                    keep = max(keep, len(self._held) - at)
                    break
                at = self._held.find(s[0], at + 1)
        out = self._held[: len(self._held) - keep]
        self._held = self._held[len(out) :]
        return out

    def flush(self) -> str:
        """The rest of the text, at the end of generation."""
        if self.stopped:
            return ""
        out = self._held + self._decoder.decode(b"", final=True)
        self._held = ""
        return out
