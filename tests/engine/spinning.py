"""A matcher that never returns, for the grammar process's child to run: kept in a module of its own
so that a child imports little to build it."""

from __future__ import annotations

import os

import numpy as np

from whiz.engine.fake import byte_matchers

CRASH = ord("?")
"""The token whose `accept` ends the child's process, as llama.cpp's abort does."""
NEVER = ord("!")
"""The token whose `accept` never returns in `spinning_matchers`."""


class Spinning:
    """A real matcher whose `accept` of `NEVER` spins on the CPU for good: a C call that nothing
    can stop halfway, burning a core."""

    def __init__(self, inner):
        self.inner = inner

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        return np.array([t in (NEVER, CRASH) for t in ids.tolist()]) | self.inner.allowed(ids)

    def accept(self, token: int) -> None:
        while token == NEVER:
            pass
        if token == CRASH:
            os._exit(134)
        self.inner.accept(token)

    def can_end(self) -> bool:
        return self.inner.can_end()


def spinning_matchers():
    build = byte_matchers()
    return lambda gbnf, root: Spinning(build(gbnf, root))
