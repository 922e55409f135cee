"""A small GBNF recognizer in Python: the fake runtime's grammar, and a check for tests.

llama.cpp matches grammars for the real model (`llamacpp.LlamaGrammarMatcher`); this reads the
same text, for the parts of GBNF whiz writes (literals, character classes, rule references,
groups, alternatives, `? * + {m,n}`). Like llama.cpp's matcher it follows a text one character
at a time: the state is the set of stacks of what may still come (a stack for each way the text
so far can be read), so a long call costs the same per character as a short one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from whiz.errors import EngineError


@dataclass(frozen=True, eq=False)
class Lit:
    text: str


@dataclass(frozen=True, eq=False)
class Cls:
    ranges: tuple[tuple[str, str], ...]
    negated: bool

    def matches(self, ch: str) -> bool:
        return any(lo <= ch <= hi for lo, hi in self.ranges) != self.negated


@dataclass(frozen=True, eq=False)
class Ref:
    name: str


@dataclass(frozen=True, eq=False)
class Seq:
    items: tuple


@dataclass(frozen=True, eq=False)
class Alt:
    options: tuple


@dataclass(frozen=True, eq=False)
class Rep:
    item: object
    low: int
    high: int | None


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "/": "/"}


class _Parser:
    def __init__(self, text: str):
        self.s = text
        self.i = 0

    def error(self, what: str) -> EngineError:
        return EngineError(f"grammar: {what} at offset {self.i}: {self.s[self.i : self.i + 30]!r}")

    def skip(self) -> None:
        while self.i < len(self.s):
            if self.s[self.i] == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            elif self.s[self.i].isspace():
                self.i += 1
            else:
                return

    def rules(self) -> dict[str, object]:
        out: dict[str, object] = {}
        self.skip()
        while self.i < len(self.s):
            name = self.name()
            self.skip()
            if not self.s.startswith("::=", self.i):
                raise self.error("expected ::=")
            self.i += 3
            out[name] = self.alternatives()
            self.skip()
        return out

    def name(self) -> str:
        m = re.compile(r"[a-zA-Z0-9-]+").match(self.s, self.i)
        if not m:
            raise self.error("expected a rule name")
        self.i = m.end()
        return m.group()

    def at_rule_start(self) -> bool:
        """A name followed by ::= starts the next rule (rules end at the next one)."""
        return bool(re.compile(r"[a-zA-Z0-9-]+\s*::=").match(self.s, self.i))

    def alternatives(self) -> object:
        options = [self.sequence()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self) -> object:
        items = []
        while True:
            self.skip()
            if self.i >= len(self.s) or self.s[self.i] in "|)" or self.at_rule_start():
                break
            items.append(self.postfix(self.atom()))
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def atom(self) -> object:
        c = self.s[self.i]
        if c == '"':
            self.i += 1
            chars = []
            while self.s[self.i] != '"':
                chars.append(self.char())
            self.i += 1
            return Lit("".join(chars))
        if c == "[":
            self.i += 1
            negated = self.s[self.i] == "^"
            self.i += negated
            ranges = []
            while self.s[self.i] != "]":
                lo = self.char()
                hi = lo
                if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                    self.i += 1
                    hi = self.char()
                ranges.append((lo, hi))
            self.i += 1
            return Cls(tuple(ranges), negated)
        if c == "(":
            self.i += 1
            inner = self.alternatives()
            self.skip()
            if self.s[self.i] != ")":
                raise self.error("expected )")
            self.i += 1
            return inner
        return Ref(self.name())

    def char(self) -> str:
        c = self.s[self.i]
        if c != "\\":
            self.i += 1
            return c
        e = self.s[self.i + 1]
        if e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            code = self.s[self.i + 2 : self.i + 2 + width]
            self.i += 2 + width
            return chr(int(code, 16))
        self.i += 2
        return _ESCAPES.get(e, e)

    def postfix(self, item: object) -> object:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in "*+?":
                self.i += 1
                item = Rep(item, 1 if c == "+" else 0, 1 if c == "?" else None)
            elif c == "{":
                end = self.s.index("}", self.i)
                low, _, high = self.s[self.i + 1 : end].partition(",")
                bounded = high.strip() if "," in self.s[self.i : end] else low.strip()
                item = Rep(item, int(low or 0), int(bounded) if bounded else None)
                self.i = end + 1
            else:
                break
        return item


@dataclass(frozen=True)
class _LitAt:
    """Character `i` of a literal, the next to match."""

    text: str
    i: int


@dataclass(frozen=True)
class _RepAt:
    """A repetition after `count` items (counted up to its bound only: more are all alike)."""

    rep: Rep
    count: int


Stack = tuple | None
"""What may still come, innermost first: (frame, rest of the stack), or None when nothing."""

_MAX_EXPANSION = 100_000


class Gbnf:
    """A parsed grammar: `accepts(text)` for a whole text, `viable(text)` for a prefix, and
    `start`/`step` to follow a text one character at a time."""

    def __init__(self, text: str, root: str = "root"):
        self.rules = _Parser(text).rules()
        if root not in self.rules:
            raise EngineError(f"grammar: no rule named {root!r}")
        for node in self.rules.values():
            self._check_refs(node)
        self.root = root
        self._expanded: dict[Stack, frozenset[Stack]] = {}

    def _check_refs(self, node: object) -> None:
        if isinstance(node, Ref) and node.name not in self.rules:
            raise EngineError(f"grammar: rule {node.name!r} is used but not defined")
        for child in getattr(node, "items", ()) + getattr(node, "options", ()):
            self._check_refs(child)
        if isinstance(node, Rep):
            self._check_refs(node.item)

    def start(self) -> frozenset[Stack]:
        return self._expand((Ref(self.root), None))

    def _expand(self, stack: Stack) -> frozenset[Stack]:
        """The stacks `stack` can become before its next character: each has a character to
        match on top (a literal's or a class), or is None (the text may end here)."""
        found = self._expanded.get(stack)
        if found is not None:
            return found
        out: set[Stack] = set()
        seen: set[Stack] = set()
        todo = [stack]
        while todo:
            s = todo.pop()
            if s in seen:
                continue
            seen.add(s)
            if len(seen) > _MAX_EXPANSION:
                raise EngineError("grammar: a rule expands without end (left recursion?)")
            if s is None:
                out.add(None)
                continue
            top, rest = s
            if isinstance(top, (_LitAt, Cls)):
                out.add(s)
            elif isinstance(top, Lit):
                todo.append((_LitAt(top.text, 0), rest) if top.text else rest)
            elif isinstance(top, Ref):
                todo.append((self.rules[top.name], rest))
            elif isinstance(top, Alt):
                todo.extend((option, rest) for option in top.options)
            elif isinstance(top, Seq):
                for item in reversed(top.items):
                    rest = (item, rest)
                todo.append(rest)
            elif isinstance(top, Rep):
                todo.append((_RepAt(top, 0), rest))
            elif isinstance(top, _RepAt):
                rep, count = top.rep, top.count
                if count >= rep.low:
                    todo.append(rest)
                if rep.high is None or count < rep.high:
                    after = count + 1 if rep.high is not None or count < rep.low else count
                    todo.append((rep.item, (_RepAt(rep, after), rest)))
        found = frozenset(out)
        self._expanded[stack] = found
        return found

    def step(self, stacks: frozenset[Stack], ch: str) -> frozenset[Stack]:
        """The stacks after one more character (empty: the grammar refuses it)."""
        out: set[Stack] = set()
        for s in stacks:
            if s is None:
                continue
            top, rest = s
            if isinstance(top, _LitAt):
                if top.text[top.i] != ch:
                    continue
                if top.i + 1 < len(top.text):
                    out.add((_LitAt(top.text, top.i + 1), rest))
                    continue
            elif not top.matches(ch):
                continue
            out |= self._expand(rest)
        return frozenset(out)

    def follow(self, text: str) -> frozenset[Stack]:
        stacks = self.start()
        for ch in text:
            if not stacks:
                break
            stacks = self.step(stacks, ch)
        return stacks

    def accepts(self, text: str) -> bool:
        return None in self.follow(text)

    def viable(self, text: str) -> bool:
        """True when some text that starts with `text` is accepted (or `text` itself is)."""
        return bool(self.follow(text))

    def next_chars(self, text: str) -> list:
        """What may come right after `text`: characters, and `Cls` classes."""
        return _tops(self.follow(text))


def _tops(stacks: frozenset[Stack]) -> list:
    return [s[0].text[s[0].i] if isinstance(s[0], _LitAt) else s[0] for s in stacks if s is not None]


def _split(data: bytes) -> tuple[str, bytes] | None:
    """UTF-8 bytes as (the whole characters, a character's first bytes still to be finished);
    None when the bytes cannot be UTF-8 however they go on."""
    try:
        return data.decode(), b""
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data":
            return None
        return data[: exc.start].decode(), data[exc.start :]


def _could_start(partial: bytes, nexts: list) -> bool:
    """Whether a character that begins with the bytes `partial` may come next."""
    need = (2 if partial[0] < 0xE0 else 3 if partial[0] < 0xF0 else 4) - len(partial)
    try:
        lo, hi = (partial + b"\x80" * need).decode(), (partial + b"\xbf" * need).decode()
    except UnicodeDecodeError:
        return False
    for n in nexts:
        if isinstance(n, str):
            if n.encode().startswith(partial):
                return True
        elif n.negated or any(a <= hi and b >= lo for a, b in n.ranges):
            return True
    return False


class GbnfMatcher:
    """A `GrammarMatcher` over a tokenizer, with `Gbnf` (the fake runtime's)."""

    def __init__(self, grammar: Gbnf, tokenizer):
        self.grammar = grammar
        self.tokenizer = tokenizer
        self._stacks = grammar.start()
        self._pending = b""
        """The first bytes of a character not yet whole."""

    def _advance(self, piece: bytes) -> tuple[frozenset[Stack], bytes] | None:
        split = _split(self._pending + piece)
        if split is None:
            return None
        text, partial = split
        stacks = self._stacks
        for ch in text:
            stacks = self.grammar.step(stacks, ch)
            if not stacks:
                return None
        if partial and not _could_start(partial, _tops(stacks)):
            return None
        return stacks, partial

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ids), dtype=bool)
        for k, token in enumerate(ids.tolist()):
            if self.tokenizer.is_eog(token):
                out[k] = self.can_end()
            else:
                piece = self.tokenizer.piece(token)
                out[k] = bool(piece) and self._advance(piece) is not None
        return out

    def accept(self, token: int) -> None:
        advanced = self._advance(self.tokenizer.piece(token))
        if advanced is None:
            raise EngineError(f"grammar: token {token} is not allowed here")
        self._stacks, self._pending = advanced

    def can_end(self) -> bool:
        return not self._pending and None in self._stacks
