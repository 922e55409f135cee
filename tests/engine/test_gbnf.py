"""The Python GBNF recognizer the fake runtime constrains its output with."""

import numpy as np
import pytest

from whiz.engine.fake import ByteTokenizer
from whiz.engine.gbnf import Gbnf, GbnfMatcher
from whiz.errors import EngineError

GRAMMAR = r"""
root ::= "ab" item{2,3} end
item ::= [0-9] | "(" root ")"
end  ::= [!?]? # a comment
"""


def test_whole_texts_and_prefixes():
    g = Gbnf(GRAMMAR)
    assert g.accepts("ab12") and g.accepts("ab123!") and g.accepts("ab1(ab23)")
    assert not g.accepts("ab1") and not g.accepts("ab1234") and not g.accepts("ab12x")
    assert g.viable("") and g.viable("a") and g.viable("ab1(ab2")
    assert not g.viable("b") and not g.viable("ab1(x")


def test_what_may_come_next():
    g = Gbnf(GRAMMAR)
    nexts = g.next_chars("ab1")
    allowed = {
        chr(c)
        for c in range(32, 127)
        if any(n == chr(c) if isinstance(n, str) else n.matches(chr(c)) for n in nexts)
    }
    assert allowed == set("0123456789(")


def test_a_rule_used_but_not_defined_is_an_error():
    with pytest.raises(EngineError, match="item"):
        Gbnf('root ::= "a" item')


def test_the_matcher_allows_tokens_and_the_end_as_the_grammar_does():
    tok = ByteTokenizer()
    m = GbnfMatcher(Gbnf('root ::= "h" [ei]+ "!"'), tok)
    ids = np.array([ord("h"), ord("e"), tok.im_end])
    assert m.allowed(ids).tolist() == [True, False, False]
    for ch in "hei!":
        m.accept(ord(ch))
    assert m.can_end()
    assert m.allowed(ids).tolist() == [False, False, True]


def test_multibyte_characters_arrive_a_byte_at_a_time():
    tok = ByteTokenizer()
    m = GbnfMatcher(Gbnf('root ::= "\u00e9" "x"'), tok)
    first, second = "\u00e9".encode()
    assert m.allowed(np.array([first, ord("x")])).tolist() == [True, False]
    m.accept(first)
    assert m.allowed(np.array([second, ord("x")])).tolist() == [True, False]
    m.accept(second)
    assert m.allowed(np.array([ord("x")])).tolist() == [True]
