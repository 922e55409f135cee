"""A small GBNF recognizer in Python: the fake runtime's grammar, and a check for tests.

llama.cpp matches grammars for the real model (`llamacpp.LlamaGrammarMatcher`); this reads the
same text, for the parts of GBNF whiz writes (literals, character classes, rule references,
groups, alternatives, `? * + {m,n}`), and answers two questions about a text: does the grammar
accept it whole, and can it still be completed. It parses the text from the start each time,
which is plenty for a fake model's one-byte tokens and for tests, not for serving.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from whiz.errors import EngineError


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Cls:
    ranges: tuple[tuple[str, str], ...]
    negated: bool

    def matches(self, ch: str) -> bool:
        return any(lo <= ch <= hi for lo, hi in self.ranges) != self.negated


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Seq:
    items: tuple


@dataclass(frozen=True)
class Alt:
    options: tuple


@dataclass(frozen=True)
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


_OPEN = -1
"""An end position meaning "the text ran out inside this part": the text can still be completed."""


class Gbnf:
    """A parsed grammar: `accepts(text)` for a whole text, `viable(text)` for a prefix."""

    def __init__(self, text: str, root: str = "root"):
        self.rules = _Parser(text).rules()
        if root not in self.rules:
            raise EngineError(f"grammar: no rule named {root!r}")
        for name in re.findall(r"Ref\(name='([^']+)'\)", repr(self.rules)):
            if name not in self.rules:
                raise EngineError(f"grammar: rule {name!r} is used but not defined")
        self.root = root

    def _ends(self, text: str, nexts: list | None = None) -> set[int]:
        """Where parses of `text` from the root can end (`_OPEN`: past its end). With `nexts`, the
        literal characters and classes that could come right after the text are appended to it."""
        memo: dict[tuple[int, int], frozenset[int]] = {}
        n = len(text)

        def ends(node: object, pos: int) -> frozenset[int]:
            key = (id(node), pos)
            if key in memo:
                return memo[key]
            memo[key] = frozenset()  # a rule that reaches itself without consuming text: no match
            out: set[int] = set()
            if isinstance(node, Lit):
                rest = text[pos : pos + len(node.text)]
                if rest == node.text:
                    out.add(pos + len(node.text))
                elif pos + len(node.text) > n and node.text.startswith(rest):
                    out.add(_OPEN)
                    if nexts is not None:
                        nexts.append(node.text[n - pos])
            elif isinstance(node, Cls):
                if pos == n:
                    out.add(_OPEN)
                    if nexts is not None:
                        nexts.append(node)
                elif node.matches(text[pos]):
                    out.add(pos + 1)
            elif isinstance(node, Ref):
                out = set(ends(self.rules[node.name], pos))
            elif isinstance(node, Alt):
                for option in node.options:
                    out |= ends(option, pos)
            elif isinstance(node, Seq):
                frontier = {pos}
                for item in node.items:
                    nxt: set[int] = set()
                    for p in frontier:
                        for e in ends(item, p):
                            (out if e == _OPEN else nxt).add(e)
                    frontier = nxt
                out |= frontier
            elif isinstance(node, Rep):
                frontier, count, seen = {pos}, 0, set()
                if node.low == 0:
                    out.add(pos)
                while frontier and (node.high is None or count < node.high):
                    nxt = set()
                    for p in frontier:
                        for e in ends(node.item, p):
                            (out if e == _OPEN else nxt).add(e)
                    count += 1
                    if count >= node.low:
                        nxt -= seen
                        seen |= nxt
                        out |= nxt
                    frontier = nxt
            memo[key] = frozenset(out)
            return memo[key]

        return set(ends(Ref(self.root), 0))

    def accepts(self, text: str) -> bool:
        return len(text) in self._ends(text)

    def next_chars(self, text: str) -> list:
        """What may come right after `text`: characters, and `Cls` classes."""
        nexts: list = []
        self._ends(text, nexts)
        return nexts

    def viable(self, text: str) -> bool:
        """True when some text that starts with `text` is accepted (or `text` itself is)."""
        found = self._ends(text)
        return _OPEN in found or len(text) in found


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
    """A `GrammarMatcher` over a tokenizer, with `Gbnf` (the fake runtime's; slow but exact)."""

    def __init__(self, grammar: Gbnf, tokenizer):
        self.grammar = grammar
        self.tokenizer = tokenizer
        self._bytes = b""

    def allowed(self, ids: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ids), dtype=bool)
        now = _split(self._bytes)
        # One parse tells every one-byte token; longer ones are parsed each.
        nexts = self.grammar.next_chars(now[0]) if now is not None and not now[1] else None
        for k, token in enumerate(ids.tolist()):
            if self.tokenizer.is_eog(token):
                out[k] = self.can_end()
                continue
            piece = self.tokenizer.piece(token)
            if not piece:
                continue
            if nexts is not None and len(piece) == 1:
                ch = chr(piece[0])
                if piece[0] < 0x80:
                    out[k] = any(n == ch if isinstance(n, str) else n.matches(ch) for n in nexts)
                else:
                    out[k] = _could_start(piece, nexts)
                continue
            split = _split(self._bytes + piece)
            if split is None or not self.grammar.viable(split[0]):
                continue
            out[k] = not split[1] or _could_start(split[1], self.grammar.next_chars(split[0]))
        return out

    def accept(self, token: int) -> None:
        self._bytes += self.tokenizer.piece(token)

    def can_end(self) -> bool:
        now = _split(self._bytes)
        return now is not None and not now[1] and self.grammar.accepts(now[0])
