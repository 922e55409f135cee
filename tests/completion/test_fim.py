"""Fill-in-the-middle prompts: the format, and a layout where typing only extends the prompt."""

from __future__ import annotations

from whiz.completion.boundary import Cursor
from whiz.completion.fake import FimByteTokenizer
from whiz.completion.fim import ExtraFile, FimBudget, FimInput, FimVocab, build
from whiz.engine.fake import ByteTokenizer

TOK = FimByteTokenizer()
VOCAB = FimVocab.of(TOK)
ID = TOK.ids
BODY = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40))


def prompt(before: str, after: str = "\n\nprint(1)\n", **budget) -> list[int]:
    return build(VOCAB, TOK, FimInput(before, after), FimBudget(**budget)).tokens


def common(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_the_vocabulary_check_finds_the_fim_tokens_or_reports_none():
    assert VOCAB is not None and VOCAB.repo == ID["<|repo_name|>"]
    assert FimVocab.of(ByteTokenizer()) is None


def test_the_prompt_is_prefix_suffix_middle_in_qwen_order():
    head = "import os\n" * 8  # lines 0-7: the block before the cursor's
    tokens = prompt(head + "def f(x):\n    return ", "\n\nprint(1)\n")
    text = b"".join(TOK.piece(t) for t in tokens).decode()
    middle = "def f(x):\n    return"  # the cursor's block, up to the cursor, goes after the middle token
    repo = "<|repo_name|>project\n<|file_sep|>file\n"  # always, as llama.cpp's server writes it
    assert text == f"{repo}<|fim_prefix|>{head}<|fim_suffix|>\n\nprint(1)\n<|fim_middle|>{middle}"


def test_typing_a_character_only_changes_the_end_of_the_prompt():
    before = BODY + "def g(x):\n"
    line = "    return self.f(x) == 12"
    prompts = [prompt(before + line[:n]) for n in range(len(line) + 1)]
    for old, new in zip(prompts, prompts[1:], strict=False):
        assert common(old, new) == min(len(old), len(new))  # one extends the other
    assert len(prompts[-1]) > len(prompts[0])


def test_a_new_line_within_the_block_keeps_the_suffix_cached():
    before = BODY + "def g(x):\n"  # line 120: the first line of a block of 8
    old = prompt(before + "    y = x")
    new = prompt(before + "    y = x\n    return y")
    assert common(old, new) == len(old)


def test_crossing_into_the_next_block_of_lines_moves_the_middle_once():
    lines = "".join(f"x{i} = {i}\n" for i in range(20)).splitlines(keepends=True)
    at7, at8, at9 = (prompt("".join(lines[:n])) for n in (7, 8, 9))  # the cursor on line n
    assert common(at7, at8) < at8.index(ID["<|fim_suffix|>"])  # line 8 starts a block: all moves
    assert common(at8, at9) == len(at8)  # then the block's next lines only extend the prompt


def test_special_token_names_in_the_file_stay_plain_text():
    tokens = prompt('MARK = "<|fim_middle|><|endoftext|>"\n', '\nEND = "<|fim_suffix|>"\n')
    assert tokens.count(ID["<|fim_middle|>"]) == 1 and tokens.count(ID["<|fim_suffix|>"]) == 1
    assert ID["<|endoftext|>"] not in tokens


def test_spaces_before_the_cursor_are_left_for_the_model_to_write():
    made = build(VOCAB, TOK, FimInput("def f():\n    ", ""), FimBudget())
    assert made.healed == "    " and TOK.piece(made.tokens[-1]) == b"\n"


def test_the_cursor_lines_partial_last_word_or_symbol_run_is_left_for_the_model_to_write():
    # A model's tokenizer joins "(" to the word after it, so a prompt ending in "(" makes the model
    # write a word that does not join ("unicode(text)"): the prompt stops before the partial token.
    cases = {
        "    x = self._munge(": "(",
        "    x = self.": ".",
        "    x = self._mu": "_mu",
        "    ret": " ret",
        "    x ==": " ==",
        "    x = 12": "",
        "    x = ": " ",
        "    x = " + "a" * 60: "",  # a long word is left whole
    }
    for line, cut in cases.items():
        made = build(VOCAB, TOK, FimInput("def f():\n" + line, "\n"), FimBudget())
        text = b"".join(TOK.piece(t) for t in made.tokens).decode()
        assert made.healed == cut and text.endswith("<|fim_middle|>def f():\n" + line[: len(line) - len(cut)])


def test_a_long_prefix_loses_lines_from_its_start_and_keeps_that_start_while_typing():
    budget = {"prefix_tokens": 600, "anchor_lines": 8, "trim_lines": 32}
    made = build(VOCAB, TOK, FimInput(BODY + "x = 1\n", ""), FimBudget(**budget))
    assert made.truncated and made.tokens.count(ID["<|fim_prefix|>"]) == 1
    assert len(made.tokens) < len((BODY + "x = 1\n").encode())
    old, new = prompt(BODY + "x = 1\ny", **budget), prompt(BODY + "x = 1\ny = 2", **budget)
    assert new[: len(old)] == old


def test_a_long_suffix_is_cut_after_a_whole_line():
    made = build(VOCAB, TOK, FimInput("x = ", BODY), FimBudget(suffix_tokens=100))
    tokens = made.tokens
    suffix = tokens[tokens.index(ID["<|fim_suffix|>"]) + 1 : tokens.index(ID["<|fim_middle|>"])]
    assert made.truncated and 0 < len(suffix) <= 100 and suffix[-1] == ord("\n")


def test_other_files_come_first_in_the_repository_format_the_oldest_dropped_over_budget():
    extra = [ExtraFile("old.py", "A = 1\n" * 200), ExtraFile("util.py", "def helper():\n    return 2\n")]
    made = build(VOCAB, TOK, FimInput("x = ", "", extra, "main.py"), FimBudget(extra_tokens=300))
    text = b"".join(TOK.piece(t) for t in made.tokens).decode()
    assert text.startswith("<|repo_name|>project\n<|file_sep|>util.py\ndef helper():")
    assert "<|file_sep|>main.py\n<|fim_prefix|>" in text and "old.py" not in text and made.truncated


def test_the_cursor_knows_its_line_and_the_next_line_with_text():
    c = Cursor.at("a = 1\nb = f(", ")\n\n\nc = 3\n")
    assert (c.line_before, c.line_after, c.next_line) == ("b = f(", ")", "c = 3")


class CountingTokenizer(FimByteTokenizer):
    def __init__(self) -> None:
        super().__init__()
        self.chars = 0

    def encode(self, text: str) -> list[int]:
        self.chars += len(text)
        return super().encode(text)


def test_a_huge_file_costs_no_more_tokenizing_than_the_budget():
    tok = CountingTokenizer()
    big = "x = 1  # " + "y" * 200 + "\n"
    extra = [ExtraFile(f"f{i}.py", big * 500) for i in range(50)]
    given = FimInput(big * 20_000 + "z = ", "\n" + big * 20_000, extra, "main.py")
    made = build(VOCAB, tok, given, FimBudget())
    assert made.truncated and len(made.tokens) <= 2048 + 512 + 4096 + 300
    assert tok.chars < 300_000  # of about 10 MB sent


def test_one_enormous_line_is_cut_not_refused():
    made = build(VOCAB, TOK, FimInput("x = '" + "a" * 1_000_000, "b" * 1_000_000 + "'\n"), FimBudget())
    assert made.truncated and len(made.tokens) <= 2048 + 512 + 3 + 16  # 16: the repository header
