"""The grammar of tool calls: which calls it lets the model write, for the schemas tools send.

Checked with the Python recognizer (`whiz.engine.gbnf`); tests/integration/test_tool_grammar_real.py
checks that llama.cpp reads the same grammars and agrees.
"""

import json

import pytest

from whiz.chat.messages import Tool
from whiz.chat.toolcalls import ToolCallParser
from whiz.chat.toolgrammar import ANY_ORDER_KEYS, literal, request_grammar, schema_grammar, tool_call_grammar
from whiz.engine.gbnf import Gbnf

READ = Tool(
    "read_file",
    "Read a file.",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "start": {"type": "integer"}, "end": {"type": "integer"}},
        "required": ["path"],
    },
)
EDIT = Tool(
    "edit",
    "",
    {
        "type": "object",
        "properties": {
            "mode": {"enum": ["replace", "append"]},
            "lines": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
            "where": {
                "type": "object",
                "properties": {"line": {"type": "integer"}, "after": {"type": "boolean"}},
                "required": ["line"],
            },
        },
        "required": ["mode", "lines"],
    },
)


def call(name: str, args: dict | str) -> str:
    body = args if isinstance(args, str) else json.dumps(args)
    return f'<tool_call>\n{{"name": "{name}", "arguments": {body}}}\n</tool_call>'


@pytest.fixture(scope="module")
def tagged() -> Gbnf:
    return Gbnf(tool_call_grammar([READ, EDIT]).gbnf, "tagged")


def test_a_call_with_its_required_arguments_is_accepted(tagged):
    assert tagged.accepts(call("read_file", {"path": "src/a.py"}))
    assert tagged.accepts(call("read_file", {"path": "a.py", "start": 3, "end": -10}))


def test_optional_arguments_may_be_left_out_in_any_combination(tagged):
    assert tagged.accepts(call("read_file", {"path": "a.py", "end": 4}))
    assert tagged.accepts(call("edit", {"mode": "append", "lines": ["x"], "where": {"line": 2}}))


def test_a_missing_required_argument_is_refused_where_the_object_would_close(tagged):
    assert not tagged.accepts(call("read_file", {"start": 3}))
    args = '<tool_call>\n{"name": "read_file", "arguments": {"start": 3'
    assert tagged.viable(args) and tagged.viable(args + ', "path"')
    assert not tagged.viable(args + "}")


def test_keys_come_in_any_order_each_once(tagged):
    assert tagged.accepts(call("read_file", {"end": 4, "path": "a.py", "start": 1}))
    assert tagged.accepts(call("edit", {"lines": ["x"], "where": {"line": 2}, "mode": "append"}))
    assert not tagged.accepts(call("read_file", '{"path": "a.py", "path": "b.py"}'))


def test_objects_with_many_keys_take_them_in_the_schemas_order():
    keys = [f"k{i}" for i in range(ANY_ORDER_KEYS + 1)]
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in keys}, "required": ["k1"]}
    g = Gbnf(schema_grammar(schema))
    assert g.accepts(json.dumps({k: 1 for k in keys}))
    assert g.accepts('{"k1": 1, "k3": 2}')
    assert not g.accepts('{"k3": 2, "k1": 1}')


def test_only_the_offered_tools_and_their_own_keys(tagged):
    assert not tagged.viable('<tool_call>\n{"name": "write_file"')
    assert not tagged.accepts(call("read_file", {"path": "a.py", "verbose": True}))
    assert not tagged.accepts(call("edit", {"path": "a.py"}))  # read_file's argument, not edit's


def test_types_are_enforced(tagged):
    assert not tagged.accepts(call("read_file", {"path": 7}))
    assert not tagged.accepts(call("read_file", {"path": "a.py", "start": "3"}))
    assert not tagged.accepts(call("read_file", {"path": "a.py", "start": 1.5}))


def test_enums_allow_only_their_values(tagged):
    assert tagged.accepts(call("edit", {"mode": "replace", "lines": ["a"]}))
    assert not tagged.accepts(call("edit", {"mode": "delete", "lines": ["a"]}))


def test_nested_objects_follow_their_own_schema(tagged):
    assert tagged.accepts(
        call("edit", {"mode": "replace", "lines": ["a"], "where": {"line": 1, "after": False}})
    )
    assert not tagged.accepts(call("edit", {"mode": "replace", "lines": ["a"], "where": {"after": True}}))


def test_arrays_keep_their_item_type_and_bounds(tagged):
    assert tagged.accepts(call("edit", {"mode": "replace", "lines": ["a", "b", "c"]}))
    assert not tagged.accepts(call("edit", {"mode": "replace", "lines": []}))
    assert not tagged.accepts(call("edit", {"mode": "replace", "lines": ["a", "b", "c", "d"]}))
    assert not tagged.accepts(call("edit", {"mode": "replace", "lines": [1]}))


def test_strings_take_json_escapes_and_refuse_raw_control_characters(tagged):
    text = 'print("hi")\n\tx = "\\\\" + \u00e9\u4e2d'
    assert tagged.accepts(call("read_file", {"path": text}))
    assert tagged.accepts(call("read_file", '{"path": "\\u00e9\\/x"}'))
    assert not tagged.viable('<tool_call>\n{"name": "read_file", "arguments": {"path": "a\nb')
    assert not tagged.viable('<tool_call>\n{"name": "read_file", "arguments": {"path": "a\\q')


def test_every_call_the_grammar_accepts_is_read_as_that_call(tagged):
    text = call("edit", {"mode": "append", "lines": ["x = '}'", 'y = "</tool_call>"']})
    assert tagged.accepts(text)
    parser = ToolCallParser(names=["read_file", "edit"])
    [parsed] = parser.feed(text) + parser.finish()
    assert parsed.name == "edit"
    assert json.loads(parsed.arguments)["lines"][1] == 'y = "</tool_call>"'


def test_whitespace_is_free_but_bounded(tagged):
    assert tagged.accepts('<tool_call>{"name":"read_file","arguments":{"path":"a"}}</tool_call>')
    pretty = '<tool_call>\n{\n  "name": "read_file",\n  "arguments": {\n    "path": "a"\n  }\n}\n</tool_call>'
    assert tagged.accepts(pretty)
    assert not tagged.viable('<tool_call>\n{"name":' + " " * 40)


def test_a_reply_that_is_only_the_call_bare_fenced_or_a_list():
    opening = Gbnf(tool_call_grammar([READ, EDIT]).gbnf, "opening")
    args = {"path": "a.py"}
    one = json.dumps({"name": "read_file", "arguments": args})
    assert opening.accepts(one)
    assert opening.accepts(f"```json\n{one}\n```")
    assert opening.accepts(f"[{one}, {one}]")
    assert not opening.viable(one + "\nand then some text")


def test_schema_features_tools_use():
    defs = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "type": "object",
        "properties": {
            "tree": {"$ref": "#/$defs/node"},
            "id": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "tag": {"type": ["string", "null"]},
            "kind": {"const": "x"},
            "meta": {"type": "object", "additionalProperties": {"type": "number"}},
            "short": {"type": "string", "maxLength": 3},
        },
    }
    g = Gbnf(schema_grammar(defs))
    good = {"tree": {"kids": [{"kids": []}, {}]}, "id": None, "tag": "t", "kind": "x", "meta": {"a": 1.5}}
    assert g.accepts(json.dumps(good))
    assert g.accepts(json.dumps({"id": 4, "short": "abc"}))  # six keys: in the schema's order
    assert not g.accepts(json.dumps({"short": "abcd"}))
    assert not g.accepts(json.dumps({"kind": "y"}))
    assert not g.accepts(json.dumps({"meta": {"a": "b"}}))
    assert not g.accepts(json.dumps({"tree": {"kids": [{"kids": [3]}]}}))


def test_a_schema_that_says_nothing_allows_any_json():
    g = Gbnf(schema_grammar({}))
    for value in ({"a": [1, {"b": None}], "c": "d"}, [True, False], "s", -1.5e3, None):
        assert g.accepts(json.dumps(value))
    assert not g.accepts("{'a': 1}")


def test_tool_names_and_keys_are_escaped_as_literals():
    odd = Tool(
        'say "hi"\\', "", {"type": "object", "properties": {'k"\n': {"type": "string"}}, "required": ['k"\n']}
    )
    g = Gbnf(tool_call_grammar([odd]).gbnf, "tagged")
    assert g.accepts(call(json.dumps(odd.name)[1:-1], {'k"\n': "v"}))
    assert literal('a"\\\n') == r'"a\"\\\n"'


def test_a_required_call_is_constrained_from_the_first_token():
    g = request_grammar([READ, EDIT], "required")
    required = Gbnf(g.gbnf, g.start)
    assert required.accepts(call("read_file", {"path": "a.py"}))
    assert required.accepts(
        call("read_file", {"path": "a.py"}) + "\n" + call("edit", {"mode": "append", "lines": ["x"]})
    )
    assert required.accepts(json.dumps({"name": "read_file", "arguments": {"path": "a.py"}}))
    assert not required.viable("Sure, ")
    assert request_grammar([READ, EDIT], None).start is None


def test_a_named_tool_choice_allows_that_tool_only():
    g = request_grammar([READ, EDIT], "edit")
    named = Gbnf(g.gbnf, g.start)
    assert named.accepts(call("edit", {"mode": "append", "lines": ["x"]}))
    assert not named.viable('<tool_call>\n{"name": "read_file"')
