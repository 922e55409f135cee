"""Tokens back to text: whole characters only, and stop strings that never leak."""

from tests.cost import growth
from whiz.chat.detok import Detokenizer
from whiz.engine.fake import ByteTokenizer


def feed_all(detok: Detokenizer, text: str) -> list[str]:
    tok = ByteTokenizer()
    return [detok.feed(t) for t in tok.encode(text)] + [detok.flush()]


def test_multibyte_characters_split_across_tokens_come_out_whole():
    text = "héllo 世界 🎉!"
    pieces = feed_all(Detokenizer(ByteTokenizer()), text)
    assert "".join(pieces) == text
    assert not any("\ufffd" in p for p in pieces)
    # The 4-byte emoji arrives as one piece, after its last byte.
    assert "🎉" in pieces


def test_stop_string_split_across_tokens_never_leaks():
    detok = Detokenizer(ByteTokenizer(), stop=["STOP"])
    pieces = feed_all(detok, "abc STOP def")
    assert "".join(pieces) == "abc "
    assert detok.stopped
    assert not any("S" in p for p in pieces)
    assert detok.feed(ord("x")) == ""


def test_held_prefix_is_released_when_it_turns_out_not_to_be_a_stop():
    detok = Detokenizer(ByteTokenizer(), stop=["STOP"])
    pieces = feed_all(detok, "a STx ST")
    assert "".join(pieces) == "a STx ST"
    assert not detok.stopped
    # "ST" at the very end is held until flush: it could still become "STOP".
    assert pieces[-1] == "ST"


def test_earliest_of_several_stops_and_multibyte_stop():
    detok = Detokenizer(ByteTokenizer(), stop=["界", "zzz"])
    assert "".join(feed_all(detok, "hi 世界 zzz")) == "hi 世"
    detok = Detokenizer(ByteTokenizer(), stop=["\n\n", "END"])
    assert "".join(feed_all(detok, "line\n\nEND")) == "line"


def test_special_tokens_decode_to_their_text():
    tok = ByteTokenizer()
    detok = Detokenizer(tok)
    out = "".join(detok.feed(t) for t in tok.encode("a<|im_end|>b")) + detok.flush()
    assert out == "a<|im_end|>b"


def test_stop_that_starts_earliest_wins_when_two_complete_together():
    # "é" completes on its second byte, and so does "aé", which starts one character earlier.
    detok = Detokenizer(ByteTokenizer(), stop=["é", "aé"])
    assert "".join(feed_all(detok, "xaé tail")) == "x"


def test_stop_strings_are_matched_incrementally():
    # Every token is checked against the stops on the event loop: only the held-back tail (shorter
    # than the longest stop) is searched, never the whole text so far, so a reply's stops cost
    # time linear in its length (four times the text: about four times the CPU time; searching the
    # whole text, 11 to 16 times), with four 64-character stops, the most a request may ask.
    stops = ["a" * 63 + "Z", "b" * 64, "\n\n\n\nEND", "c" * 64]
    tok = ByteTokenizer()

    def text(n: int) -> str:
        return ("a" * 60 + "b" * 60 + "\n\n\n") * n  # near misses all the way: the worst case

    detok = Detokenizer(tok, stop=stops)
    out = "".join(feed_all(detok, text(1650) + "\nEND"))
    assert out == text(1650)[:-3] and detok.stopped

    def stopping(n: int):
        ids = tok.encode(text(n) + "\nEND")

        def run() -> None:
            detok = Detokenizer(tok, stop=stops)
            for t in ids:
                detok.feed(t)

        return run

    assert growth(stopping, 100) < 8
