"""Streaming <tool_call> parsing: whole calls out, everything else kept as text, in order."""

import json

from tests.cost import growth
from whiz.chat.messages import ToolCall
from whiz.chat.toolcalls import TextPart, ToolCallParser

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def run(parser: ToolCallParser, deltas: list[str]) -> list[TextPart | ToolCall]:
    out = []
    for d in deltas:
        out += parser.feed(d)
    return out + parser.finish()


def squash(pieces) -> list:
    """Adjacent text parts joined; calls as (name, arguments object)."""
    out: list = []
    for p in pieces:
        if isinstance(p, TextPart):
            if out and isinstance(out[-1], str):
                out[-1] += p.text
            else:
                out.append(p.text)
        else:
            out.append((p.name, json.loads(p.arguments)))
    return out


def test_tags_split_across_every_delta():
    text = "Checking. " + CALL + " done"
    pieces = run(ToolCallParser(), list(text))  # one character per delta
    assert squash(pieces) == ["Checking. ", ("get_weather", {"city": "Paris"}), " done"]
    call = next(p for p in pieces if isinstance(p, ToolCall))
    assert call.id.startswith("call_")


def test_two_calls_get_distinct_ids():
    pieces = run(ToolCallParser(), [CALL + "\n" + CALL.replace("Paris", "Oslo")])
    calls = [p for p in pieces if isinstance(p, ToolCall)]
    assert [json.loads(c.arguments)["city"] for c in calls] == ["Paris", "Oslo"]
    assert calls[0].id != calls[1].id


def test_text_before_a_possible_tag_streams_before_the_tag_is_known():
    parser = ToolCallParser()
    assert squash(parser.feed("Hello <tool")) == ["Hello "]
    assert squash(parser.feed("box> ok")) == ["<toolbox> ok"]


def test_malformed_json_is_kept_as_text():
    bad = "<tool_call>\n{not json}\n</tool_call>"
    pieces = run(ToolCallParser(), ["a ", bad[:7], bad[7:], " b"])
    assert squash(pieces) == ["a " + bad + " b"]
    assert not any(isinstance(p, ToolCall) for p in pieces)


def test_json_without_a_name_is_kept_as_text():
    block = '<tool_call>\n{"arguments": {}}\n</tool_call>'
    assert squash(run(ToolCallParser(), [block])) == [block]


def test_unclosed_call_at_the_end_is_parsed_when_its_json_is_whole():
    pieces = run(ToolCallParser(), ['<tool_call>\n{"name": "f", "arguments": {"a": 1}}'])
    assert squash(pieces) == [("f", {"a": 1})]
    cut = run(ToolCallParser(), ['<tool_call>\n{"name": "f", "argu'])
    assert squash(cut) == ['<tool_call>\n{"name": "f", "argu']


def test_string_arguments_pass_through_unchanged():
    pieces = run(ToolCallParser(), ['<tool_call>{"name": "f", "arguments": "{\\"x\\": 2}"}</tool_call>'])
    assert pieces[0].arguments == '{"x": 2}'


def test_disabled_parser_passes_tags_as_text():
    assert squash(run(ToolCallParser(enabled=False), list(CALL))) == [CALL]


def run_parser(parser: ToolCallParser, text: str, step: int = 3) -> tuple[list, list]:
    """Feed `text` in small pieces: (what came out before the end, what the end flushed)."""
    early = [piece for i in range(0, len(text), step) for piece in parser.feed(text[i : i + step])]
    return early, parser.finish()


def test_a_call_written_as_fenced_json_or_bare_json_is_read_as_a_call():
    fenced = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
    bare = '{"name": "get_weather", "parameters": {"city": "Rome"}}'
    for text, city in ((fenced, "Paris"), (bare, "Rome")):
        early, late = run_parser(ToolCallParser(names=["get_weather"]), text)
        assert early == []  # held: it might be a call
        [call] = late
        assert isinstance(call, ToolCall) and call.name == "get_weather"
        assert json.loads(call.arguments) == {"city": city}


def test_a_list_of_calls_in_json_is_each_call():
    text = '[{"name": "read", "arguments": {"path": "a"}}, {"name": "read", "arguments": {"path": "b"}}]'
    _, calls = run_parser(ToolCallParser(names=["read"]), text)
    assert [json.loads(c.arguments)["path"] for c in calls] == ["a", "b"]


def test_json_that_is_not_a_call_to_an_offered_tool_stays_text():
    text = '{"name": "rm_rf", "arguments": {}}'
    early, late = run_parser(ToolCallParser(names=["read"]), text)
    assert "".join(p.text for p in early + late) == text
    data = '```json\n{"a": 1}\n```'
    early, late = run_parser(ToolCallParser(names=["read"]), data)
    assert "".join(p.text for p in early + late) == data


def test_a_reply_that_starts_with_code_streams_as_it_comes():
    text = "```python\nprint('hi')\n```\nThat prints hi."
    early, late = run_parser(ToolCallParser(names=["read"]), text)
    assert early and "".join(p.text for p in early + late) == text


def test_without_tool_names_only_tagged_calls_are_read():
    text = '{"name": "read", "arguments": {}}'
    early, late = run_parser(ToolCallParser(), text)
    assert "".join(p.text for p in early + late) == text


def test_a_closing_tag_inside_an_argument_string_does_not_end_the_call():
    body = '{"name": "write", "arguments": {"text": "print(\\"</tool_call>\\")"}}'
    parser = ToolCallParser(names=["write"])
    pieces = [
        p for chunk in ("<tool_call>\n", body[:30], body[30:], "\n</tool_call>") for p in parser.feed(chunk)
    ]
    [call] = pieces + parser.finish()
    assert json.loads(call.arguments) == {"text": 'print("</tool_call>")'}


def test_a_long_call_streamed_token_by_token_costs_time_linear_in_its_length():
    # The parser runs on the event loop for every token. A model writing a whole file as one call
    # (tens of thousands of tokens) once made each token rescan and recopy the call so far: 200k
    # characters cost about 18 s of loop time, stalling every other stream. Linear, four times the
    # call costs about four times the CPU time (rescanning it, about sixteen).
    def call(lines: int) -> tuple[str, str]:
        content = "line of a file\\n" * lines
        return content, json.dumps({"name": "write", "arguments": {"path": "a.py", "content": content}})

    for names in ((), ("write",)):  # tagged, and held as bare JSON to the end

        def deltas(lines: int, names=names) -> list[str]:
            text = call(lines)[1]
            return ["<tool_call>\n"] + list(text) + ["\n</tool_call>"] if not names else list(text)

        content = call(12_000)[0]  # about 200k characters of arguments
        pieces = run(ToolCallParser(names=names), deltas(12_000))
        assert squash(pieces) == [("write", {"path": "a.py", "content": content})]

        def parsing(lines: int, names=names):
            streamed = deltas(lines)
            return lambda: run(ToolCallParser(names=names), streamed)

        assert growth(parsing, 3000) < 8, names
