"""What building a tool grammar may cost: each subschema once, and a 400 naming the cap past one."""

import json

import pytest

from whiz.bench.attackers import nested_any_of, type_list_bomb
from whiz.chat.messages import Tool
from whiz.chat.toolgrammar import GrammarLimits, GrammarTooLarge, literal, schema_grammar, tool_call_grammar
from whiz.engine.gbnf import Gbnf


def rules(gbnf: str) -> int:
    return gbnf.count("::=")


def nested_call(depth: int) -> str:
    args: object = "leaf"
    for _ in range(depth):
        args = {"a": args}
    return f'<tool_call>\n{{"name": "f", "arguments": {json.dumps(args)}}}\n</tool_call>'


def test_a_type_list_walks_its_subschema_once_per_type():
    # k^d before: 4 types, 6 deep made 12,294 rules (1.8 MB of grammar) and took seconds.
    small = tool_call_grammar([Tool("f", "", type_list_bomb(1, 6))]).gbnf
    bomb = tool_call_grammar([Tool("f", "", type_list_bomb(4, 6))]).gbnf
    assert rules(bomb) == rules(small)
    assert Gbnf(bomb, "tagged").accepts(nested_call(6))


def test_the_issues_772_byte_bomb_is_a_small_grammar():
    schema = type_list_bomb()
    assert 700 < len(json.dumps(schema)) < 850
    gbnf = tool_call_grammar([Tool("f", "", schema)]).gbnf
    assert rules(gbnf) < 40 and Gbnf(gbnf, "tagged").accepts(nested_call(8))


def test_distinct_types_that_share_properties_cost_one_rule_set_each():
    types = ["object", "array", "string", "number", "integer", "boolean", "null"]
    gbnf = schema_grammar(type_list_bomb(d=10, types=types))
    assert rules(gbnf) < 200
    assert Gbnf(gbnf).accepts('{"a": [1, 2]}') and Gbnf(gbnf).accepts('{"a": {"a": null}}')
    assert not Gbnf(gbnf).accepts('{"b": 1}')


def test_nested_alternatives_past_the_width_cap_are_refused_naming_it():
    with pytest.raises(GrammarTooLarge) as info:
        tool_call_grammar([Tool("f", "", nested_any_of())], required=True)
    err = info.value
    assert (err.status, err.type, err.param) == (400, "invalid_request_error", "tools")
    assert "256 ways" in err.message and "tool_grammar" in err.message
    # Below the cap, the same shape is a grammar.
    tool_call_grammar([Tool("f", "", nested_any_of(k=4, d=4))], required=True)


@pytest.mark.parametrize(
    ("limits", "schema", "named"),
    [
        (GrammarLimits(max_depth=8), type_list_bomb(1, 10), "8 levels deep"),
        (
            GrammarLimits(max_rules=40),
            {"properties": {f"k{i}": {"type": "integer"} for i in range(30)}},
            "40 grammar rules",
        ),
        (GrammarLimits(max_chars=2000), {"enum": ["x" * 100] * 5 + ["y" * 2000]}, "2,000 characters"),
        (GrammarLimits(max_alternatives=3), {"anyOf": [{"type": "string"}] * 4}, "anyOf of more than 3"),
        (GrammarLimits(max_alternatives=3), {"enum": [1, 2, 3, 4]}, "enum of more than 3"),
        (GrammarLimits(budget_s=0), {"type": "object", "properties": {"a": {}}}, "more than 0 s"),
    ],
    ids=["depth", "rules", "size", "anyOf", "enum", "time"],
)
def test_each_cap_is_a_400_that_names_it(limits, schema, named):
    with pytest.raises(GrammarTooLarge) as info:
        tool_call_grammar([Tool("f", "", schema)], limits=limits)
    assert named in info.value.message


def test_recursion_through_refs_counts_toward_the_depth():
    defs = {
        f"d{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/d{i + 1}"}}} for i in range(50)
    }
    schema = {"$defs": {**defs, "d50": {"type": "integer"}}, "$ref": "#/$defs/d0"}
    with pytest.raises(GrammarTooLarge, match="32 levels deep"):
        tool_call_grammar([Tool("f", "", schema)])


def test_many_keys_with_one_rule_name_still_build():
    # Every key below names its rules alike ("a-" after cleaning): names are numbered, not searched.
    keys = ["a" + "!" * i for i in range(1, 400)]
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in keys}, "required": keys[:1]}
    gbnf = schema_grammar(schema)
    assert Gbnf(gbnf).accepts('{"a!": 1, "a!!!": 2}')


def test_the_most_tools_a_request_may_offer_with_honest_schemas_build():
    # MAX_TOOLS tools of five optional arguments (each object's keys in any order: 2^5 rules),
    # one of them an object of five more: the caps leave room for what real clients send.
    inner = {"type": "object", "properties": {f"inner_{j}": {"type": "string"} for j in range(5)}}
    props = {f"argument_number_{j}": {"type": ["string", "null"]} for j in range(4)} | {"options": inner}
    tools = [Tool(f"tool_{i}", "", {"type": "object", "properties": props}) for i in range(128)]
    gbnf = tool_call_grammar(tools, required=True).gbnf
    call = '{"name": "tool_7", "arguments": {"options": {"inner_3": "x"}, "argument_number_1": null}}'
    assert Gbnf(gbnf, "required").accepts(call)


@pytest.mark.parametrize(
    "schema",
    [
        {"allOf": [{"type": "object", "required": [f"k{i}" for i in range(30_000)]}]},
        {"type": "object", "required": [f"k{i}" for i in range(30_000)] * 2},
    ],
    ids=["allOf", "required"],
)
def test_long_required_lists_meet_the_rule_cap_not_the_clock(schema):
    # Merging required lists used to search a list for each key: 30k keys took 8 s of the budget.
    with pytest.raises(GrammarTooLarge, match="32,768 grammar rules"):
        tool_call_grammar([Tool("f", "", schema)])


def test_literals_escape_what_gbnf_needs():
    assert literal('a"b\\c\nd\re\tf\x01') == r'"a\"b\\c\nd\re\tf\x01"'
