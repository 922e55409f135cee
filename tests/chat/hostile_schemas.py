"""Tool schemas built to make a grammar expensive, as an attacker sends them (shared by tests)."""

from __future__ import annotations

import json


def type_list_bomb(k: int = 6, d: int = 8, types: list[str] | None = None) -> dict:
    """`{"type": [k types], "properties": {"a": <the same again>}}`, d deep: walking each type's
    subschema again costs k^d. The defaults make ~770 bytes of JSON."""
    schema: dict = {"type": "string"}
    for _ in range(d):
        schema = {"type": types or ["object"] * k, "properties": {"a": schema}}
    return schema


def nested_any_of(k: int = 4, d: int = 5) -> dict:
    """k `$defs` per level, each an object whose one property is an anyOf of the k defs below, d
    levels: k^d ways to read one call at once, each a stack the matcher checks on every token.
    The defaults make ~3.3 KB of JSON."""
    defs: dict = {}
    for level in range(d):
        for j in range(k):
            below = [{"$ref": f"#/$defs/L{level + 1}_{i}"} for i in range(k)]
            defs[f"L{level}_{j}"] = (
                {"type": "integer"}
                if level == d - 1
                else {"type": "object", "properties": {"a": {"anyOf": below}}, "required": ["a"]}
            )
    top = [{"$ref": f"#/$defs/L0_{i}"} for i in range(k)]
    return {"$defs": defs, "type": "object", "properties": {"x": {"anyOf": top}}, "required": ["x"]}


def size(schema: dict) -> int:
    return len(json.dumps(schema))
