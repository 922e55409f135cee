"""Drafters: cheap guesses of the next tokens, checked by the model in one batch.

Much of what a coding model writes already exists: the file it is rewriting, code it read
earlier in the session. A drafter proposes those tokens; the scheduler verifies the whole draft
in one forward pass and keeps the part the model agrees with, so output is unchanged.

Each drafter sees the full context (prompt and output so far) on every call and keeps its own
incremental index, so a call costs about as much as the tokens added since the last one.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from whiz.engine.speculative import DraftLength
from whiz.seams import Drafter


class PromptLookupDrafter:
    """Copies what followed the most recent earlier occurrence of the context's last n-gram.

    Works with no prediction at all: an agent that read a file earlier in the session gets the
    speed-up when it rewrites that file.
    """

    def __init__(self, max_ngram: int = 4, min_ngram: int = 2):
        self.sizes = range(max_ngram, min_ngram - 1, -1)
        # n -> {n-gram: position just after its latest occurrence}
        self._index: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in self.sizes}
        self._indexed = 0

    def _update(self, context: Sequence[int]) -> None:
        # Index every n-gram that ends before the last token: the one ending at the very end is
        # the key we look up, and must not find itself.
        for end in range(max(self._indexed, 1), len(context)):
            for n in self.sizes:
                if end >= n:
                    self._index[n][tuple(context[end - n : end])] = end
        self._indexed = max(self._indexed, len(context))

    def propose(self, context: Sequence[int], n: int) -> list[int]:
        if n <= 0 or len(context) < 2:
            return []
        self._update(context)
        for size in self.sizes:
            if len(context) < size:
                continue
            start = self._index[size].get(tuple(context[-size:]))
            if start is not None and start < len(context):
                return list(context[start : start + n])
        return []


class PredictionDrafter:
    """Follows a pointer through the predicted output (OpenAI's Predicted Outputs).

    While the output agrees with the prediction the pointer advances. After a mismatch (the model
    changed something) it re-anchors on the longest recent suffix of the output that occurs in the
    prediction, nearest after where it was, so an edit in the middle of a file costs only the few
    tokens around the edit.

    The index of the prediction's n-grams is built a slice per call (`INDEX_STEP` tokens), on the
    engine thread every request shares: a long prediction costs each step a little, never one
    step all of it. A re-anchor meanwhile looks in the part indexed so far.
    """

    ANCHORS = (8, 4, 2)
    INDEX_STEP = 2048

    def __init__(self, prediction: Sequence[int], prompt_len: int):
        self.prediction = prediction
        self.prompt_len = prompt_len
        self._pos: int | None = 0
        self._seen = 0
        self._index: dict[int, dict[tuple[int, ...], list[int]]] = {n: {} for n in self.ANCHORS}
        self.indexed = 0
        """The n-grams that end at or before this position of the prediction are in the index."""

    def _index_more(self) -> None:
        stop = min(len(self.prediction), self.indexed + self.INDEX_STEP)
        for end in range(self.indexed + 1, stop + 1):
            for n in self.ANCHORS:
                if end >= n:
                    self._index[n].setdefault(tuple(self.prediction[end - n : end]), []).append(end)
        self.indexed = stop

    def _follow(self, output: Sequence[int]) -> None:
        lost = False
        for token in output[self._seen :]:
            if (
                not lost
                and self._pos is not None
                and self._pos < len(self.prediction)
                and self.prediction[self._pos] == token
            ):
                self._pos += 1
            else:
                lost = True
        self._seen = len(output)
        if lost:
            self._pos = self._anchor(output)

    def _anchor(self, output: Sequence[int]) -> int | None:
        before = self._pos or 0
        for n in self.ANCHORS:
            if len(output) < n:
                continue
            ends = self._index[n].get(tuple(output[-n:]))
            if ends:
                # Ends are indexed in order: the first at or after `before` in log time (a
                # prediction of one repeated token has an n-gram at every position).
                at = bisect.bisect_left(ends, before)
                return ends[at] if at < len(ends) else ends[-1]
        return None

    def propose(self, context: Sequence[int], n: int) -> list[int]:
        if n <= 0:
            return []
        self._index_more()
        self._follow(context[self.prompt_len :])
        if self._pos is None:
            return []
        return self.prediction[self._pos : self._pos + n]


class ChainDrafter:
    """Asks each drafter in turn, each with its own draft length; the first non-empty draft wins.

    Every drafter keeps its own acceptance estimate and cost model: a prediction is usually right,
    lookup guesses are riskier, and a draft model spends time on every token it proposes. One
    drafter that keeps missing pauses itself without silencing the others.
    """

    def __init__(self, entries: Sequence[tuple[Drafter, DraftLength]]):
        self.entries = list(entries)
        self._used: DraftLength | None = None

    def propose(self, context: Sequence[int], room: int) -> list[int]:
        """A draft of at most `room` tokens (empty: decode plainly this step)."""
        self._used = None
        for drafter, length in self.entries:
            k = min(length.next(), room)
            if k <= 0:
                continue
            draft = list(drafter.propose(context, k))[:k]
            if draft:
                self._used = length
                return draft
        return []

    def update(self, proposed: int, accepted: int) -> None:
        """Tell the drafter that made the last draft how much of it the model kept."""
        if self._used is not None:
            self._used.update(proposed, accepted)
