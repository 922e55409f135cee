"""A fake model that fills in the middle, shipped in the package so completion tests need no model.

Its vocabulary is the byte tokenizer's plus Qwen2.5-Coder's FIM and repository tokens. Its "model"
is a script from the prompt's prefix and suffix sections to the whole middle; the fake writes that
middle one byte per token, continuing whatever of it the prompt already holds after
`<|fim_middle|>`, then ends with `<|endoftext|>`. `knows(document)` is the script of a model that
has read the file being typed: it always writes what the document holds between the two.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from whiz.engine.fake import SPECIALS, FakeRuntime, echo_script
from whiz.engine.scheduler import Scheduler
from whiz.engine.types import EngineInfo

FIM_SPECIALS = (
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
ALL_SPECIALS = SPECIALS + FIM_SPECIALS
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in ALL_SPECIALS) + ")")

FimScript = Callable[[str, str], str]
"""(the prompt's prefix section, its suffix section) -> the middle the model writes."""


class FimByteTokenizer:
    """One token per byte (ids 0-255), then ChatML's and the FIM special tokens."""

    n_vocab = 256 + len(ALL_SPECIALS)

    def __init__(self) -> None:
        self.ids = {s: 256 + i for i, s in enumerate(ALL_SPECIALS)}
        self.eos = self.ids["<|endoftext|>"]
        self._eog = {
            self.ids[s]
            for s in ("<|endoftext|>", "<|im_end|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")
        }

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for part in _SPECIAL_RE.split(text):
            if part in self.ids:
                out.append(self.ids[part])
            elif part:
                out.extend(part.encode())
        return out

    def piece(self, token: int) -> bytes:
        return bytes([token]) if token < 256 else ALL_SPECIALS[token - 256].encode()

    def is_eog(self, token: int) -> bool:
        return token in self._eog


def knows(document: str) -> FimScript:
    """The script of a model that knows `document`: the middle is what lies between the prompt's
    prefix and suffix in it (nothing where they are not its start and end)."""

    def middle(prefix: str, suffix: str) -> str:
        if (
            document.startswith(prefix)
            and document.endswith(suffix)
            and len(prefix) + len(suffix) <= len(document)
        ):
            return document[len(prefix) : len(document) - len(suffix)]
        return ""

    return middle


class FimFakeRuntime(FakeRuntime):
    """A `FakeRuntime` whose model writes `script`'s middle after `<|fim_middle|>`."""

    def __init__(self, script: FimScript, **kw):
        super().__init__(echo_script, **kw)
        self.tokenizer = FimByteTokenizer()  # type: ignore[assignment]
        self.n_vocab = FimByteTokenizer.n_vocab
        self.fim_script = script

    def _text(self, tokens: list[int]) -> str:
        return b"".join(self.tokenizer.piece(t) for t in tokens).decode(errors="replace")

    def _logits(self, history: list[int]) -> np.ndarray:
        ids = self.tokenizer.ids
        logits = np.zeros(self.n_vocab, dtype=np.float32)
        nxt = self.tokenizer.eos
        if ids["<|fim_middle|>"] in history:
            mid = len(history) - 1 - history[::-1].index(ids["<|fim_middle|>"])
            head = history[:mid]
            pre = len(head) - 1 - head[::-1].index(ids["<|fim_prefix|>"])
            suf = head.index(ids["<|fim_suffix|>"], pre)
            reply = self.fim_script(self._text(head[pre + 1 : suf]), self._text(head[suf + 1 :])).encode()
            written = bytes(t for t in history[mid + 1 :] if t < 256)
            if reply.startswith(written) and len(written) < len(reply):
                nxt = reply[len(written)]
        logits[nxt] = self.confidence
        return logits


def fim_fake_engine(script: FimScript, *, n_ctx: int = 8192, **kw) -> Scheduler:
    """A ready engine over the FIM fake, as `whiz.engine.fake.fake_engine` builds the chat one."""
    runtime = FimFakeRuntime(script, n_ctx=n_ctx, **kw)
    info = EngineInfo(model="fake-fim", n_ctx=n_ctx, n_ctx_train=n_ctx, n_seq_max=runtime.n_seq_max)
    return Scheduler(runtime, info)
