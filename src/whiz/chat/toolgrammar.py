"""A grammar for calls to the tools a request offers: the call's JSON is well-formed by construction.

The grammar is GBNF (llama.cpp's grammar format), one rule per tool: the call object
`{"name": <that tool's name>, "arguments": <its parameters' JSON schema>}`. Two roots start it,
matching how `toolcalls.py` reads calls: `tagged`, a call in Qwen's `<tool_call>` tags, anywhere in
a reply; `opening`, a reply that is only the call's JSON (bare or in a ```json fence), as small
models often write it. The engine switches the grammar on when the model starts one of these
(`LazyGrammar`), so text before a call stays free.

JSON schema is read as far as tool schemas use it: types (and lists of them), properties,
required, additionalProperties, enum, const, anyOf/oneOf, allOf of objects, items, min/maxItems,
min/maxLength, $ref into $defs or definitions, nullable. `pattern`, `format` and numeric bounds are
not enforced (any string, any number). Properties come in any order (in the schema's order for
objects of more than `ANY_ORDER_KEYS` keys), each once, optional ones may be left out, and no other
keys are allowed unless `additionalProperties` says so. A custom tool (a
free-form tool, Codex's `apply_patch`) is a function of one string here: its text is any JSON string,
its own grammar not enforced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from whiz.chat.messages import Tool
from whiz.chat.toolcalls import CLOSE, OPEN
from whiz.engine.types import LazyGrammar

OPENING = r'\s*(?:```(?:json)?\s*)?\[?\s*\{\s*"name"\s*:'
"""A reply that starts like a call's JSON, bare or fenced: the grammar covers the whole reply."""

_BASICS = {
    "ws": r"[ \t\n]{0,16}",
    "value": "object | array | string | number | boolean | null",
    "object": '"{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"',
    "array": '"[" ws ( value ( ws "," ws value )* )? ws "]"',
    "string": r'"\"" char* "\""',
    "char": r'[^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )',
    "integer": '"-"? ( "0" | [1-9] [0-9]{0,15} )',
    "number": 'integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,4} )?',
    "boolean": '"true" | "false"',
    "null": '"null"',
}
"""Generic JSON: what a schema that says nothing more allows. Whitespace between tokens is
bounded, so a model cannot pad a call with newlines until its tokens run out."""

ANY_ORDER_KEYS = 5
"""Objects with at most this many keys take them in any order (a rule per set of keys written:
2^n); larger ones in the schema's order. Models write keys in their own order, and a grammar that
forces another one pushes them off what they meant to write."""

_NEEDS = {
    "value": ("object", "array", "string", "number", "boolean", "null"),
    "object": ("ws", "string", "value"),
    "array": ("ws", "value"),
    "string": ("char",),
    "number": ("integer",),
}


def literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _json_literal(value: Any) -> str:
    return literal(json.dumps(value, ensure_ascii=False))


class _Rules:
    """The rules of one grammar, built from schemas."""

    def __init__(self, root_schema: dict | None = None):
        self.rules: dict[str, str] = {}
        self._root_schema = root_schema or {}
        self._refs: dict[str, str] = {}

    def basic(self, name: str) -> str:
        if name not in self.rules:
            self.rules[name] = _BASICS[name]
            for dep in _NEEDS.get(name, ()):
                self.basic(dep)
        return name

    def add(self, name: str, body: str) -> str:
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", name).strip("-") or "r"
        unique, n = name, 1
        while unique in self.rules or unique in _BASICS:
            unique, n = f"{name}-{n}", n + 1
        self.rules[unique] = body
        return unique

    def schema(self, s: Any, name: str) -> str:
        """An expression for the JSON values `s` allows (a rule name, or a short inline one)."""
        if not isinstance(s, dict) or not s:
            return self.basic("value")
        if s.get("nullable") is True:
            rest = {k: v for k, v in s.items() if k != "nullable"}
            return f"( {self.schema(rest, name)} | {self.basic('null')} )"
        if isinstance(s.get("$ref"), str):
            return self._ref(s["$ref"])
        if "const" in s:
            return _json_literal(s["const"])
        if isinstance(s.get("enum"), list) and s["enum"]:
            return "( " + " | ".join(_json_literal(v) for v in s["enum"]) + " )"
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list) and s[key]:
                options = [self.schema(sub, f"{name}-{i}") for i, sub in enumerate(s[key])]
                return self.add(name, " | ".join(options))
        if isinstance(s.get("allOf"), list) and s["allOf"]:
            return self.schema(_merge_all_of(s), name)
        kind = s.get("type")
        if isinstance(kind, list):
            options = [self.schema({**s, "type": k}, f"{name}-{k}") for k in kind if isinstance(k, str)]
            return self.add(name, " | ".join(options)) if options else self.basic("value")
        if kind == "object" or (kind is None and ("properties" in s or "additionalProperties" in s)):
            return self._object(s, name)
        if kind == "array" or (kind is None and "items" in s):
            return self._array(s, name)
        if kind == "string":
            return self._string(s, name)
        if kind in ("integer", "number", "boolean", "null"):
            return self.basic(kind)
        return self.basic("value")

    def _ref(self, ref: str) -> str:
        if ref in self._refs:
            return self._refs[ref]
        target: Any = self._root_schema
        for part in ref.removeprefix("#").strip("/").split("/") if ref != "#" else []:
            target = (
                target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
            )
        if not ref.startswith("#") or not isinstance(target, dict):
            return self.basic("value")  # a remote or broken reference: any value
        # Named first, so a schema that refers to itself (a tree) refers to this rule.
        name = self.add("ref-" + ref.rsplit("/", 1)[-1], "")
        self._refs[ref] = name
        self.rules[name] = self.schema(target, name + "-v")
        return name

    def _string(self, s: dict, name: str) -> str:
        low, high = s.get("minLength"), s.get("maxLength")
        if not isinstance(low, int) and not isinstance(high, int):
            return self.basic("string")
        low = low if isinstance(low, int) and low > 0 else 0
        bound = f"{low}," + (str(high) if isinstance(high, int) else "")
        return self.add(name, r'"\"" ' + self.basic("char") + "{" + bound + r'} "\""')

    def _array(self, s: dict, name: str) -> str:
        items = s.get("items")
        if not isinstance(items, dict):
            return self.basic("array")
        item = self.schema(items, name + "-item")
        low = s.get("minItems") if isinstance(s.get("minItems"), int) else 0
        high = s.get("maxItems") if isinstance(s.get("maxItems"), int) else None
        ws = self.basic("ws")
        more = f'( {ws} "," {ws} {item} )'
        if high is not None and high <= 0:
            return self.add(name, f'"[" {ws} "]"')
        rest_low, rest_high = max(low - 1, 0), None if high is None else high - 1
        reps = "*" if (rest_low, rest_high) == (0, None) else f"{{{rest_low},{rest_high or ''}}}"
        body = f"{item} {more}{reps}"
        if low == 0:
            body = f"( {body} )?"
        return self.add(name, f'"[" {ws} {body} {ws} "]"')

    def _object(self, s: dict, name: str) -> str:
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        required = [k for k in s.get("required") or [] if isinstance(k, str)]
        extra = s.get("additionalProperties")
        if not props and not required:
            if isinstance(extra, dict) and extra:
                pairs = self._extra_pairs(extra, name)
                ws = self.basic("ws")
                return self.add(name, f'"{{" {ws} ( {pairs} ( {ws} "," {ws} {pairs} )* )? {ws} "}}"')
            return self.basic("object")
        keys = list(props) + [k for k in required if k not in props]
        ws = self.basic("ws")
        pairs = []
        for key in keys:
            value = self.schema(props.get(key, {}), f"{name}-{key}")
            pairs.append(self.add(f"{name}-{key}-kv", f'{_json_literal(key)} {ws} ":" {ws} {value}'))
        must = [k in required for k in keys]
        more = None
        if extra is True or (isinstance(extra, dict) and extra):
            more = self._extra_pairs(extra if isinstance(extra, dict) else {}, name)
        if len(keys) <= ANY_ORDER_KEYS:
            body = self._any_order(name, pairs, must, more)
        else:
            body = self._schema_order(name, pairs, must, more)
        return self.add(name, f'"{{" {ws} {body} {ws} "}}"')

    def _any_order(self, name: str, pairs: list[str], must: list[bool], more: str | None) -> str:
        """The pairs in any order, each at most once, the required ones all there: one rule per set
        of pairs written so far (2^n of them, so only for a few keys)."""
        ws = self.basic("ws")
        full = (1 << len(pairs)) - 1
        needed = sum(1 << i for i, m in enumerate(must) if m)
        names: dict[int, str] = {}

        def then(written: int) -> str:
            """What may follow once the pairs in `written` are (a comma and another pair, or the end)."""
            if written not in names:
                if written == full and more is None:
                    return ""
                names[written] = self.add(f"{name}-has-{written}", "")
                options = [
                    f'{ws} "," {ws} {pairs[i]} {then(written | 1 << i)}'.rstrip()
                    for i in range(len(pairs))
                    if not written >> i & 1
                ]
                if more is not None:
                    options.append(f'{ws} "," {ws} {more} {names[written]}')
                body = "( " + " | ".join(options) + " )"
                self.rules[names[written]] = body + ("?" if written & needed == needed else "")
            return names[written]

        first = [f"{pairs[i]} {then(1 << i)}".rstrip() for i in range(len(pairs))]
        if more is not None:
            first.append(f"{more} {then(0)}")
        return "( " + " | ".join(first) + " )" + ("" if needed else "?")

    def _schema_order(self, name: str, pairs: list[str], must: list[bool], more: str | None) -> str:
        """The pairs in the schema's order, optional ones left out at will (for many keys)."""
        ws = self.basic("ws")
        # tails[i]: what may follow once a pair before i is written (each present pair after a comma).
        tails = {len(pairs): f'( {ws} "," {ws} {more} )*' if more is not None else ""}
        for i in range(len(pairs) - 1, 0, -1):
            step = f'{ws} "," {ws} {pairs[i]}'
            step = f"( {step} )" if must[i] else f"( {step} )?"
            tails[i] = self.add(f"{name}-after-{i - 1}", f"{step} {tails[i + 1]}".strip())
        # The first pair written: any optional one up to the first required one.
        first = []
        for i in range(len(pairs)):
            first.append(f"{pairs[i]} {tails[i + 1]}".strip())
            if must[i]:
                break
        return "( " + " | ".join(first) + " )" + ("" if any(must) else "?")

    def _extra_pairs(self, schema: dict, name: str) -> str:
        value = self.schema(schema, f"{name}-extra")
        ws = self.basic("ws")
        return self.add(f"{name}-extra-kv", f'{self.basic("string")} {ws} ":" {ws} {value}')

    def text(self) -> str:
        return "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())


def _merge_all_of(s: dict) -> dict:
    """allOf of object schemas as one object schema (their properties and requirements together)."""
    merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
    for part in [s, *s["allOf"]]:
        if not isinstance(part, dict):
            continue
        if part.get("type") not in (None, "object"):
            return {}  # not objects: any value
        merged["properties"].update(part.get("properties") or {})
        merged["required"] += [k for k in part.get("required") or [] if k not in merged["required"]]
        if "additionalProperties" in part:
            merged["additionalProperties"] = part["additionalProperties"]
    return merged


def schema_grammar(schema: dict, root: str = "root") -> str:
    """GBNF for the JSON values one schema allows, starting at rule `root` (for tests and tools)."""
    rules = _Rules(schema)
    rules.rules[root] = ""
    rules.rules[root] = rules.schema(schema, root + "-v")
    return rules.text()


def tool_call_grammar(tools: Sequence[Tool], *, required: bool = False) -> LazyGrammar:
    """The grammar of a call to one of `tools`, switched on where the model starts a call; with
    `required`, from the first token (the reply is calls only)."""
    rules = _Rules()
    rules.rules.update({"tagged": "", "opening": "", "required": "", "call": "", "calls": ""})
    ws = rules.basic("ws")
    options = []
    for i, tool in enumerate(tools):
        rules._root_schema = tool.parameters
        rules._refs = {}
        args = rules.schema(tool.parameters or {"type": "object"}, f"t{i}-args")
        options.append(
            rules.add(
                f"t{i}",
                f'"\\"name\\"" {ws} ":" {ws} {_json_literal(tool.name)} {ws} "," {ws} '
                f'"\\"arguments\\"" {ws} ":" {ws} {args}',
            )
        )
    rules.rules["call"] = f'"{{" {ws} ( {" | ".join(options)} ) {ws} "}}"'
    rules.rules["calls"] = f'call | "[" {ws} call ( {ws} "," {ws} call )* {ws} "]"'
    rules.rules["tagged"] = f"{literal(OPEN)} {ws} call {ws} {literal(CLOSE)}"
    rules.rules["opening"] = f'{ws} ( "```" "json"? {ws} calls {ws} "```" | calls ) "\\n"?'
    rules.rules["required"] = f"( {ws} tagged )+ {ws} | opening"
    return LazyGrammar(gbnf=rules.text(), tag=OPEN, opening=OPENING, start="required" if required else None)


def request_grammar(tools: Sequence[Tool], choice: str | None) -> LazyGrammar:
    """The call grammar for a request's `tool_choice`: None (the model decides), "required" (some
    call), or a tool's name (a call to that tool)."""
    if choice is None:
        return tool_call_grammar(tools)
    named = [t for t in tools if t.name == choice]
    return tool_call_grammar(named or tools, required=True)
