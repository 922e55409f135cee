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

A schema is a client's input, so building its grammar has a price, bounded by `GrammarLimits`:
each subschema (and each type of a `type` list, deduplicated) becomes rules once however often
it is reached, nesting and fan-out are capped, and so are the rule count, the grammar's size, its
width (how many ways a matcher may be inside it at once: what the matcher pays per token) and the
time spent. Past a cap the request gets a 400 (`GrammarTooLarge`) that names the cap.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from whiz.chat.messages import Tool
from whiz.chat.toolcalls import CLOSE, OPEN
from whiz.engine.types import LazyGrammar
from whiz.errors import InvalidRequest

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


_ESCAPES = {c: f"\\x{c:02x}" for c in range(0x20)} | {
    ord('"'): '\\"',
    ord("\\"): "\\\\",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
}


def literal(text: str) -> str:
    """`text` as a GBNF string literal (escaped at C speed: a schema's strings can be megabytes)."""
    return '"' + text.translate(_ESCAPES) + '"'


def _json_literal(value: Any) -> str:
    return literal(json.dumps(value, ensure_ascii=False))


@dataclass(frozen=True)
class GrammarLimits:
    """What building one request's tool grammar may cost. Tool schemas of real clients stay far
    below each bound; a schema past one is refused with a 400 that names it."""

    max_depth: int = 32
    """Schemas nested deeper than this (through properties, items, anyOf and $ref alike)."""
    max_alternatives: int = 1024
    """Branches of one anyOf or oneOf, types of one `type` list, values of one enum."""
    max_rules: int = 32_768
    """Rules in the whole grammar."""
    max_chars: int = 2_000_000
    """Characters of grammar text (llama.cpp parses all of it for every request)."""
    max_width: int = 256
    """The most ways one call's arguments may be read at once: the branches of an anyOf (or a
    type list) add up, and multiply through nesting (an anyOf of k schemas that each hold an anyOf
    of k others, d levels deep, is k^d). The matcher keeps each one alive on every token the model
    writes, on the engine thread every client shares."""
    budget_s: float = 2.0
    """Seconds of building, on a worker thread, before the request is refused."""


class GrammarTooLarge(InvalidRequest):
    """The tools' schemas would make a grammar past one of `GrammarLimits`."""

    code = "tool_grammar_too_large"

    def __init__(self, what: str):
        super().__init__(
            f"The tools' schemas are too complex to enforce as a grammar: {what}. Simplify the "
            'schemas, or send "whiz": {"tool_grammar": false} to leave tool calls unconstrained.',
            param="tools",
        )


_NAME_CHARS = 32
"""Rule names are cut to this: a name grows with each nesting level, and keys can be long."""


class _Rules:
    """The rules of one grammar, built from schemas, within `limits`."""

    def __init__(self, root_schema: dict | None = None, limits: GrammarLimits | None = None):
        self.rules: dict[str, str] = {}
        self.limits = limits or GrammarLimits()
        self._root_schema = root_schema or {}
        self._refs: dict[str, str] = {}
        self._memo: dict[tuple[int, int, str | None], tuple[Any, str]] = {}
        """(root, subschema, type) -> (the subschema, kept alive so its id stays its own; its
        expression)."""
        self._widths: dict[str, int] = {}
        """Each expression wider than 1 (see `GrammarLimits.max_width`)."""
        self._suffix: dict[str, int] = {}
        """The next number to try after each base name: unique names in linear time."""
        self._chars = 0
        self._depth = 0
        self._deadline = time.monotonic() + self.limits.budget_s

    def basic(self, name: str) -> str:
        if name not in self.rules:
            self.define(name, _BASICS[name])
            for dep in _NEEDS.get(name, ()):
                self.basic(dep)
        return name

    def add(self, name: str, body: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", name)[:_NAME_CHARS].strip("-") or "r"
        n = self._suffix.get(base, 0)
        unique = base if n == 0 else f"{base}-{n}"
        while unique in self.rules or unique in _BASICS:
            n += 1
            unique = f"{base}-{n}"
        self._suffix[base] = n + 1
        self.define(unique, body)
        return unique

    def define(self, name: str, body: str) -> None:
        """Set a rule's body, counting what it adds against the limits."""
        self._chars += (
            len(body) - len(self.rules.get(name, "")) + (0 if name in self.rules else len(name) + 6)
        )
        self.rules[name] = body
        limits = self.limits
        if len(self.rules) > limits.max_rules:
            raise GrammarTooLarge(f"more than {limits.max_rules:,} grammar rules")
        if self._chars > limits.max_chars:
            raise GrammarTooLarge(f"more than {limits.max_chars:,} characters of grammar")
        self._check_time()

    def _check_time(self) -> None:
        if time.monotonic() > self._deadline:
            raise GrammarTooLarge(f"building it took more than {self.limits.budget_s:g} s")

    def schema(self, s: Any, name: str, kind: str | None = None) -> str:
        """An expression for the JSON values `s` allows (a rule name, or a short inline one);
        with `kind`, those of that one type of its `type` list.

        Built once per (subschema, type): a schema reached again (a type list that walks the same
        properties for each of its types) gets the expression made the first time."""
        if not isinstance(s, dict) or not s:
            return self.basic("value")
        key = (id(self._root_schema), id(s), kind)
        found = self._memo.get(key)
        if found is not None:
            return found[1]
        self._depth += 1
        try:
            if self._depth > self.limits.max_depth:
                raise GrammarTooLarge(f"schemas nested more than {self.limits.max_depth} levels deep")
            self._check_time()
            expr = self._schema(s, name) if kind is None else self._typed(s, name, kind)
        finally:
            self._depth -= 1
        self._memo[key] = (s, expr)
        return expr

    def width(self, expr: str) -> int:
        """How many ways the values of `expr` may be read at once (see `GrammarLimits.max_width`)."""
        return self._widths.get(expr, 1)

    def _widen(self, expr: str, width: int) -> str:
        if width > self.limits.max_width:
            raise GrammarTooLarge(
                f"its alternatives nest into more than {self.limits.max_width:,} ways to read one call "
                "(anyOf, oneOf or type lists inside one another)"
            )
        if width > 1:
            self._widths[expr] = width
        return expr

    def _alternatives(self, items: list, what: str) -> None:
        if len(items) > self.limits.max_alternatives:
            raise GrammarTooLarge(f"{what} of more than {self.limits.max_alternatives:,} entries")

    def _one_of(self, name: str, options: list[str]) -> str:
        """A rule for any of `options` (each once): as wide as they are together."""
        unique = list(dict.fromkeys(options))
        if len(unique) == 1:
            return unique[0]
        return self._widen(self.add(name, " | ".join(unique)), sum(self.width(o) for o in unique))

    def _schema(self, s: dict, name: str) -> str:
        if s.get("nullable") is True:
            rest = self.schema({k: v for k, v in s.items() if k != "nullable"}, name)
            return self._widen(f"( {rest} | {self.basic('null')} )", self.width(rest) + 1)
        if isinstance(s.get("$ref"), str):
            return self._ref(s["$ref"])
        if "const" in s:
            return _json_literal(s["const"])
        if isinstance(s.get("enum"), list) and s["enum"]:
            # Literals part ways as soon as they differ: an enum adds no width.
            self._alternatives(s["enum"], "an enum")
            return "( " + " | ".join(dict.fromkeys(_json_literal(v) for v in s["enum"])) + " )"
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list) and s[key]:
                self._alternatives(s[key], f"an {key}")
                return self._one_of(name, [self.schema(sub, f"{name}-{i}") for i, sub in enumerate(s[key])])
        if isinstance(s.get("allOf"), list) and s["allOf"]:
            return self.schema(_merge_all_of(s), name)
        kind = s.get("type")
        if isinstance(kind, list):
            self._alternatives(kind, "a type list")
            kinds = list(dict.fromkeys(k for k in kind if isinstance(k, str)))
            if not kinds:
                return self.basic("value")
            return self._one_of(name, [self.schema(s, f"{name}-{k}", k) for k in kinds])
        return self._typed(s, name, kind)

    def _typed(self, s: dict, name: str, kind: Any) -> str:
        """The values of one type `kind` (None: as the schema's keys suggest)."""
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
        body = self.schema(target, name + "-v")
        self.define(name, body)
        return self._widen(name, self.width(body))

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
        return self._widen(self.add(name, f'"[" {ws} {body} {ws} "]"'), self.width(item))

    def _object(self, s: dict, name: str) -> str:
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        required = dict.fromkeys(k for k in s.get("required") or [] if isinstance(k, str))
        extra = s.get("additionalProperties")
        if not props and not required:
            if isinstance(extra, dict) and extra:
                pairs = self._extra_pairs(extra, name)
                ws = self.basic("ws")
                rule = self.add(name, f'"{{" {ws} ( {pairs} ( {ws} "," {ws} {pairs} )* )? {ws} "}}"')
                return self._widen(rule, self.width(pairs))
            return self.basic("object")
        keys = list(props) + [k for k in required if k not in props]
        ws = self.basic("ws")
        pairs = []
        for key in keys:
            value = self.schema(props.get(key, {}), f"{name}-{key}")
            pair = self.add(f"{name}-{key}-kv", f'{_json_literal(key)} {ws} ":" {ws} {value}')
            pairs.append(self._widen(pair, self.width(value)))
        must = [k in required for k in keys]
        more = None
        if extra is True or (isinstance(extra, dict) and extra):
            more = self._extra_pairs(extra if isinstance(extra, dict) else {}, name)
        if len(keys) <= ANY_ORDER_KEYS:
            body = self._any_order(name, pairs, must, more)
        else:
            body = self._schema_order(name, pairs, must, more)
        # One pair is read at a time: the object is as wide as its widest value.
        width = max(self.width(p) for p in pairs + ([more] if more else []))
        return self._widen(self.add(name, f'"{{" {ws} {body} {ws} "}}"'), width)

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
                self.define(names[written], body + ("?" if written & needed == needed else ""))
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
        pair = self.add(f"{name}-extra-kv", f'{self.basic("string")} {ws} ":" {ws} {value}')
        return self._widen(pair, self.width(value))

    def text(self) -> str:
        return "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())


def _merge_all_of(s: dict) -> dict:
    """allOf of object schemas as one object schema (their properties and requirements together)."""
    merged: dict[str, Any] = {"type": "object", "properties": {}}
    required: dict[str, None] = {}  # in order, each once, in linear time
    for part in [s, *s["allOf"]]:
        if not isinstance(part, dict):
            continue
        if part.get("type") not in (None, "object"):
            return {}  # not objects: any value
        merged["properties"].update(part.get("properties") or {})
        required.update(dict.fromkeys(k for k in part.get("required") or [] if isinstance(k, str)))
        if "additionalProperties" in part:
            merged["additionalProperties"] = part["additionalProperties"]
    merged["required"] = list(required)
    return merged


def schema_grammar(schema: dict, root: str = "root", limits: GrammarLimits | None = None) -> str:
    """GBNF for the JSON values one schema allows, starting at rule `root` (for tests and tools)."""
    rules = _Rules(schema, limits)
    rules.define(root, "")
    rules.define(root, rules.schema(schema, root + "-v"))
    return rules.text()


def tool_call_grammar(
    tools: Sequence[Tool], *, required: bool = False, limits: GrammarLimits | None = None
) -> LazyGrammar:
    """The grammar of a call to one of `tools`, switched on where the model starts a call; with
    `required`, from the first token (the reply is calls only). Raises `GrammarTooLarge` past
    `limits`: call it on a worker thread, never on the event loop."""
    rules = _Rules(limits=limits)
    for name in ("tagged", "opening", "required", "call", "calls"):
        rules.define(name, "")
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
    rules.define("call", f'"{{" {ws} ( {" | ".join(options)} ) {ws} "}}"')
    rules.define("calls", f'call | "[" {ws} call ( {ws} "," {ws} call )* {ws} "]"')
    rules.define("tagged", f"{literal(OPEN)} {ws} call {ws} {literal(CLOSE)}")
    rules.define("opening", f'{ws} ( "```" "json"? {ws} calls {ws} "```" | calls ) "\\n"?')
    rules.define("required", f"( {ws} tagged )+ {ws} | opening")
    return LazyGrammar(gbnf=rules.text(), tag=OPEN, opening=OPENING, start="required" if required else None)


def request_grammar(
    tools: Sequence[Tool], choice: str | None, limits: GrammarLimits | None = None
) -> LazyGrammar:
    """The call grammar for a request's `tool_choice`: None (the model decides), "required" (some
    call), or a tool's name (a call to that tool). Raises `GrammarTooLarge` past `limits`."""
    if choice is None:
        return tool_call_grammar(tools, limits=limits)
    named = [t for t in tools if t.name == choice]
    return tool_call_grammar(named or tools, required=True, limits=limits)
