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
            for n in range(min(len(s) - 1, len(self._held)), 0, -1):
                if self._held.endswith(s[:n]):
                    keep = max(keep, n)
                    break
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
