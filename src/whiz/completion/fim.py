"""Fill-in-the-middle prompts in Qwen2.5-Coder's format, laid out so keystrokes reuse the KV cache.

The model reads `<|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>` and writes the text between P and S.
A prompt is only cheap to extend where it grows at its end, and typing grows the text before the
cursor, which sits in the middle of that layout: put there, every keystroke would make the engine
prefill the whole suffix again. So the lines just above the cursor (the current block of
`anchor_lines` lines, and the cursor's own line) go *after* `<|fim_middle|>`, as the start of a
middle the model continues. Typing then changes only the prompt's last tokens, and the engine finds
everything before them in the slot the previous keystroke left; the suffix is prefilled again only
when the cursor crosses into the next block of lines. Line numbers fix where blocks start; given
the previous request's `FimPrompt.anchor_hint`, the middle starts where it started then, as long as
the text just above it is still there and the cursor is fewer than `middle_lines` lines below it:
typing down a function, or deleting lines above it, then never moves the suffix.

The text typed on the cursor's line ends mid-token as often as not (`self.`, `foo(`, `ret`), and a
model never reads a token boundary there in training: its tokenizer would have joined `(` and the
next word. So the prompt stops before the cursor line's last partial pre-token (and any spaces
after it), and the model writes that text again itself (`FimPrompt.healed`; a completion that does
not is dropped): token healing, as the text before the cursor was cut at a character in training.

The prompt always opens with the repository header (`<|repo_name|>`, then the current file after
`<|file_sep|>`), as llama.cpp's server writes it and as the model was trained on whole repositories.
Other files (`input_extra`) use the repository-level format (`<|repo_name|>`, `<|file_sep|>`).
User text is tokenized with special-token names taken literally: a file that mentions
`<|fim_middle|>` must not end the prompt's prefix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from whiz.errors import InvalidRequest
from whiz.seams import Tokenizer

FIM_NAMES = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")
REPO_NAMES = ("<|repo_name|>", "<|file_sep|>")
_SPECIAL = re.compile(r"<\|[A-Za-z0-9_]{1,40}\|>")
HORIZONTAL_SPACE = " \t"
_PARTIAL = re.compile(r"(?:[^\w\r\n]|_)?[^\W\d_]+\Z| ?(?:[^\s\w]|_)+\Z")
"""The last pre-token of a line as Qwen2's tokenizer splits text: a run of letters with one leading
symbol or space (`(text`, ` self`, `_munge`), or a run of symbols with one leading space (` ==`,
`._`). Digits are split one by one, so a line ending in one needs no healing."""
MAX_HEAL_CHARS = 48


class NoFim(InvalidRequest):
    """The model has no fill-in-the-middle tokens, so it cannot complete between two texts."""

    code = "fim_unsupported"


def _single(tokenizer: Tokenizer, name: str) -> int | None:
    ids = tokenizer.encode(name)
    if len(ids) == 1 and tokenizer.piece(ids[0]) == name.encode():
        return ids[0]
    return None


@dataclass(frozen=True)
class FimVocab:
    """The model's FIM token ids; `repo`/`file_sep` are None where it lacks the repository format."""

    prefix: int
    suffix: int
    middle: int
    repo: int | None = None
    file_sep: int | None = None

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> FimVocab | None:
        """The FIM tokens in `tokenizer`'s vocabulary, or None when any of the three is missing."""
        ids = [_single(tokenizer, n) for n in FIM_NAMES]
        if any(i is None for i in ids):
            return None
        repo, sep = (_single(tokenizer, n) for n in REPO_NAMES)
        return cls(ids[0], ids[1], ids[2], repo, sep)  # type: ignore[arg-type]


def plain_tokens(tokenizer: Tokenizer, text: str) -> list[int]:
    """`text` as ordinary text: a special token's name in it is split so it stays ordinary tokens."""
    parts, at = [], 0
    for m in _SPECIAL.finditer(text):
        cut = m.start() + 2  # "<|" and "fim_middle|>" are each plain text
        parts.append(text[at:cut])
        at = cut
    parts.append(text[at:])
    return [t for part in parts if part for t in tokenizer.encode(part)]


@dataclass(frozen=True)
class ExtraFile:
    """Another file the completion may draw on (llama.cpp's `input_extra` chunk)."""

    filename: str
    text: str


@dataclass(frozen=True)
class FimInput:
    """What an editor sends: the text before and after the cursor, and other files."""

    before: str
    after: str
    extra: Sequence[ExtraFile] = ()
    filename: str | None = None


@dataclass(frozen=True)
class FimBudget:
    """How many tokens each part of a prompt may take (their sum must fit the context window)."""

    prefix_tokens: int = 2048
    suffix_tokens: int = 512
    extra_tokens: int = 4096
    anchor_lines: int = 8
    """Lines per block: the middle starts at the block holding the cursor (see the module's doc)."""
    middle_lines: int = 32
    """With a hint from the previous request, the middle keeps its start until it holds this many lines."""
    trim_lines: int = 32
    """A prefix over budget loses lines from its start in steps of this many, so its start stays put."""
    repo_name: str = "project"


@dataclass
class FimPrompt:
    tokens: list[int]
    healed: str
    """Text cut from the end of the prompt that the model writes itself (see the module's doc):
    trailing spaces (its tokens join spaces to the next word, so a prompt ending in spaces reads
    as half a token), or the last partial word or symbol run; its output loses them."""
    truncated: bool
    """Part of the prefix, suffix or other files did not fit the budget."""
    anchor_hint: str = ""
    """The text just above where the middle starts (its last `HINT_CHARS`); given to the next
    request's `build`, the middle starts there again while it can."""


MAX_CHARS_PER_TOKEN = 16
"""Text longer than this many characters per token of budget cannot fit: it is never tokenized, so
a request's cost stays bounded by its budget, not by the size of the file it sends."""


HINT_CHARS = 256


def build(
    vocab: FimVocab,
    tokenizer: Tokenizer,
    given: FimInput,
    budget: FimBudget,
    anchor_hint: str | None = None,
) -> FimPrompt:
    """The prompt for `given`, token ids ready for the engine; `anchor_hint` is the previous
    prompt's, for the same client (see the module's doc)."""
    lines_before = given.before.split("\n")
    cursor_line = len(lines_before) - 1
    anchor = _anchor(given.before, cursor_line, budget, anchor_hint)
    head_lines, middle_lines = lines_before[:anchor], lines_before[anchor:]
    middle = "\n".join(middle_lines)
    healed = _healed(middle)
    middle = middle[: len(middle) - len(healed)]
    # A block of absurdly long lines (minified code): the end of it, no longer than the prefix.
    mid = plain_tokens(tokenizer, middle[-budget.prefix_tokens * MAX_CHARS_PER_TOKEN :])
    cut_middle = len(mid) > budget.prefix_tokens or len(middle) > budget.prefix_tokens * MAX_CHARS_PER_TOKEN
    mid = mid[-budget.prefix_tokens :] if budget.prefix_tokens > 0 else []

    prefix, cut_prefix = _prefix_tokens(tokenizer, head_lines, budget)
    suffix, cut_suffix = _suffix_tokens(tokenizer, given.after, budget.suffix_tokens)
    head, cut_extra = _repository(vocab, tokenizer, given, budget)
    tokens = [*head, vocab.prefix, *prefix, vocab.suffix, *suffix, vocab.middle, *mid]
    hint = "".join(x + "\n" for x in head_lines[-HINT_CHARS:])[-HINT_CHARS:]
    return FimPrompt(tokens, healed, cut_prefix or cut_suffix or cut_extra or cut_middle, hint)


def _healed(middle: str) -> str:
    """What the model writes again: the spaces at the end of the cursor's line, or else its last
    partial pre-token (none past `MAX_HEAL_CHARS`: a long word is left whole)."""
    line = middle[middle.rfind("\n") + 1 :]
    spaces = line[len(line.rstrip(HORIZONTAL_SPACE)) :]
    if spaces:
        return spaces
    tail = line[-(MAX_HEAL_CHARS + 1) :]  # a bounded search: a line may be megabytes
    m = _PARTIAL.search(tail)
    return (
        m.group()
        if m and (m.start() > 0 or len(tail) == len(line)) and len(m.group()) <= MAX_HEAL_CHARS
        else ""
    )


def _anchor(before: str, cursor_line: int, budget: FimBudget, hint: str | None) -> int:
    """The line where the middle starts: where the hint ends, while that is close enough above
    the cursor; else the start of the cursor's block of `anchor_lines` lines."""
    fresh = cursor_line - cursor_line % max(budget.anchor_lines, 1)
    if hint is None:
        return fresh
    if hint == "":
        line = 0  # the middle started at the top of the file
    else:
        at = before.rfind(hint)
        if at < 0:
            return fresh
        line = before.count("\n", 0, at + len(hint))
    return line if line <= cursor_line < line + budget.middle_lines else fresh


def _prefix_tokens(tokenizer: Tokenizer, lines: list[str], budget: FimBudget) -> tuple[list[int], bool]:
    """The lines before the middle (each ending in a newline), in blocks aligned to line numbers,
    as many of the last blocks as fit: while typing below them, the prefix's start stays put."""
    step, limit = max(budget.trim_lines, 1), budget.prefix_tokens
    kept: list[list[int]] = []
    total = 0
    for start in range((len(lines) - 1) // step * step, -1, -step) if lines else ():
        text = "".join(x + "\n" for x in lines[start : start + step])
        tokens = plain_tokens(tokenizer, text[-limit * MAX_CHARS_PER_TOKEN :])
        if len(text) > limit * MAX_CHARS_PER_TOKEN or total + len(tokens) > limit:
            if not kept:  # the block next to the cursor alone is too long: its end
                kept.append(tokens[-limit:] if limit > 0 else [])
            return [t for block in reversed(kept) for t in block], True
        kept.append(tokens)
        total += len(tokens)
    return [t for block in reversed(kept) for t in block], False


def _suffix_tokens(tokenizer: Tokenizer, text: str, limit: int) -> tuple[list[int], bool]:
    """The start of the text after the cursor: as many whole lines as fit in `limit` tokens."""
    out: list[int] = []
    at = 0
    while at < len(text):
        nl = text.find("\n", at)
        end = len(text) if nl < 0 else nl + 1
        line = text[at:end]
        tokens = plain_tokens(tokenizer, line[: limit * MAX_CHARS_PER_TOKEN])
        if len(line) > limit * MAX_CHARS_PER_TOKEN or len(out) + len(tokens) > limit:
            if not out:  # one long first line: its start
                out = tokens[:limit]
            return out, True
        out += tokens
        at = end
    return out, False


def _repository(
    vocab: FimVocab, tokenizer: Tokenizer, given: FimInput, budget: FimBudget
) -> tuple[list[int], bool]:
    """Other files ahead of the current one, newest last, as many of the newest as fit.

    Models with the repository tokens read `<|repo_name|>name <|file_sep|>path text ...`, ending
    with the current file's path (the header comes with no other files too); others get the
    files' text as plain context."""
    repo_format = vocab.repo is not None and vocab.file_sep is not None
    if not given.extra and not repo_format:
        return [], False
    limit = budget.extra_tokens
    chunks: list[list[int]] = []
    total = 0
    dropped = False
    for f in reversed(given.extra):
        text = f.text if f.text.endswith("\n") or not f.text else f.text + "\n"
        if len(text) + len(f.filename) > limit * MAX_CHARS_PER_TOKEN:
            dropped = True
            break
        if repo_format:
            chunk = [vocab.file_sep, *plain_tokens(tokenizer, f"{f.filename}\n{text}")]  # type: ignore[list-item]
        else:
            chunk = plain_tokens(tokenizer, f"# {f.filename}\n{text}\n" if f.filename else text + "\n")
        if total + len(chunk) > limit:
            dropped = True
            break
        chunks.append(chunk)
        total += len(chunk)
    out = [t for c in reversed(chunks) for t in c]
    if repo_format:
        name = given.filename or "file"
        head = [vocab.repo, *plain_tokens(tokenizer, budget.repo_name + "\n")]
        out = head + out + [vocab.file_sep, *plain_tokens(tokenizer, name + "\n")]
    return out, dropped  # type: ignore[return-value]
