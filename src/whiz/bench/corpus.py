"""Realistic filler text for benchmark prompts: chunks of the local Python standard library.

Source code tokenizes like what a coding agent actually sends, and every machine with Python has it.
Each prompt starts with a nonce so that no prefix cache, ours or the server's, can help a "cold" turn.
"""

from __future__ import annotations

import random
import sysconfig
import uuid
from pathlib import Path

from whiz.client import assistant_message, user_message

# Plain, varied modules present in every CPython install.
_MODULES = (
    "argparse.py", "textwrap.py", "json/decoder.py", "json/encoder.py", "difflib.py", "heapq.py",
    "shlex.py", "fractions.py", "string.py", "calendar.py", "configparser.py", "csv.py", "bisect.py",
    "dataclasses.py", "functools.py", "ipaddress.py", "pprint.py", "statistics.py", "tokenize.py",
)  # fmt: skip

SYSTEM_TEXT = (
    "You are a coding agent working in the user's repository. Read the files you are shown, answer "
    "precisely, and when you change code, keep the existing style, add tests for the behaviour you "
    "change, and explain why in one short paragraph. Prefer small, reviewable edits. Never invent APIs; "
    "when unsure, say what you would check. Reply briefly unless asked for code."
)


def nonce() -> str:
    """A never-seen-before prefix; it goes at the very start of a prompt."""
    return f"[session {uuid.uuid4().hex}]"


class Corpus:
    """Chunks of stdlib source, sized in tokens with a chars-per-token ratio the bench calibrates."""

    def __init__(self, seed: int = 0, chars_per_token: float = 3.5):
        self.chars_per_token = chars_per_token
        self._rng = random.Random(seed)
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        texts = [(stdlib / name).read_text(encoding="utf-8", errors="replace") for name in _MODULES]
        self._files = [(name, text) for name, text in zip(_MODULES, texts, strict=True) if len(text) > 4000]

    def text(self, n_tokens: int) -> str:
        """About `n_tokens` tokens of source, from a random file at a random line."""
        n_chars = max(1, round(n_tokens * self.chars_per_token))
        name, source = self._rng.choice(self._files)
        start = source.find("\n", self._rng.randrange(0, max(1, len(source) - n_chars))) + 1
        chunk = source[start : start + n_chars]
        while len(chunk) < n_chars:  # a short file: continue with another
            chunk += "\n" + self._rng.choice(self._files)[1][: n_chars - len(chunk) - 1]
        return chunk

    def history(self, n_tokens: int, chunk_tokens: int = 512) -> list[dict]:
        """A conversation of about `n_tokens`: the user shows files, the assistant acknowledges."""
        items: list[dict] = []
        left = n_tokens
        while left > 0:
            size = min(chunk_tokens, left)
            name, _ = self._rng.choice(self._files)
            items.append(user_message(f"Here is part of {name}:\n```python\n{self.text(size)}\n```"))
            items.append(assistant_message(f"Read it. {name} is clear; tell me what to change."))
            left -= size
        return items

    def question(self) -> str:
        """A short follow-up user message, different every time."""
        verb = self._rng.choice(["rename", "document", "test", "simplify", "type-annotate"])
        return f"Which function would you {verb} first? Answer in three words. ({self._rng.randrange(10**6)})"
