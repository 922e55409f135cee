"""Request bodies on the wire, validated, and turned into the model's conversation.

Unknown fields are accepted and ignored, because real clients (the Codex CLI, the openai SDK)
send fields a local server has no use for (`include`, `client_metadata`, `reasoning`, ...).
Wrong types and impossible values are errors that name the offending parameter.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from whiz.chat.messages import Message, Tool, ToolCall
from whiz.engine.types import SamplingParams
from whiz.errors import InvalidRequest
from whiz.server.files import IMAGE_PARTS, file_text, refuse_image
from whiz.server.shapes import compaction_summary


class Wire(BaseModel):
    model_config = ConfigDict(extra="allow")


MAX_STOP = 4
"""Stop strings per request: OpenAI's limit."""
MAX_STOP_CHARS = 64
"""Longest stop string: whiz's bound (OpenAI names none). Every token is checked against each stop's
prefixes on the event loop, so their length is what one request costs everyone."""


def stop_list(stop: str | list[str] | None) -> list[str]:
    """A `stop` field as a list: OpenAI's APIs take one string or several."""
    return [stop] if isinstance(stop, str) else list(stop or [])


def bounded_stops(most: int) -> Callable[[Any], Any]:
    """The validator of every API's stop field: at most `most` strings, none longer than
    MAX_STOP_CHARS (`field_validator("stop")(bounded_stops(MAX_STOP))`)."""

    def check(stop: str | list[str] | None) -> str | list[str] | None:
        stops = stop_list(stop)
        if len(stops) > most:
            raise ValueError(f"at most {most} stop sequences are allowed")
        if any(len(s) > MAX_STOP_CHARS for s in stops):
            raise ValueError(f"each stop sequence may hold at most {MAX_STOP_CHARS} characters")
        return stop

    return check


MAX_TOOLS = 128
"""Tools per request: OpenAI's limit."""
MAX_METADATA_PAIRS, MAX_METADATA_KEY_CHARS, MAX_METADATA_VALUE_CHARS = 16, 64, 512
"""OpenAI's limits on `metadata`: it is stored and echoed with every response, so it is bounded."""
OFF_LOOP_CHARS = 32_768
"""Inputs longer than this are tokenized on a worker thread: tokenizing megabytes on the event loop
would stall every other stream for as long."""
INT64 = 2**63


def parse(model: type[BaseModel], data: Any) -> Any:
    """Validate a decoded JSON body, turning the first problem into an InvalidRequest."""
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = ".".join(str(p) for p in err["loc"] if not _union_tag(p)) or None
        if err["type"] == "missing":
            raise InvalidRequest(f"'{param}' is required.", param=param) from None
        raise InvalidRequest(f"Invalid value for '{param}': {err['msg']}.", param=param) from None


def _union_tag(part: int | str) -> bool:
    """Parts pydantic adds to an error's location for union members ("str", "list[str]", ...)."""
    text = str(part)
    return text.startswith("function-") or "[" in text or text in ("str", "int", "float", "bool", "none")


MAX_JSON_DEPTH = 64
"""Deepest nesting accepted. Real bodies (a tool's JSON schema included) nest a dozen levels; deeper
ones only exist to exhaust the recursion of whatever walks them next (pydantic, json.dumps)."""


MAX_JSON_VALUES = 100_000
"""Most values (objects, arrays, numbers, strings...) in one body. Real bodies hold a few thousand:
each message, tool and schema field is a handful. A body of a million wrong ones made pydantic
build a million error objects: ~10 s and 1.6 GB for 2 MB of JSON."""


def decode_json(raw: bytes | str) -> Any:
    """Untrusted JSON, decoded: bad syntax, deep nesting and lone surrogates are a 400, never a crash."""
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"The body is not valid JSON: {exc}.", code="invalid_json") from None
    except RecursionError:  # nested past Python's own limit
        raise _too_deep() from None
    # A lone surrogate (\ud800) can only come from a JSON escape, and it breaks UTF-8 encoding
    # later (the tokenizer, the socket): look for one only when the text has such an escape.
    escapes = ("\\ud", "\\uD") if isinstance(raw, str) else (b"\\ud", b"\\uD")
    _check_tree(data, surrogates=any(e in raw for e in escapes))  # type: ignore[operator]
    return data


T = TypeVar("T")


async def read_json(raw: bytes | str, read: Callable[[Any], T]) -> T:
    """`read(decode_json(raw))`, on a worker thread when `raw` is large: decoding, checking and
    validating megabytes holds the event loop for seconds (14 MB of small numbers: about 3 s),
    and every other stream with it."""
    if len(raw) > OFF_LOOP_CHARS:
        return await asyncio.to_thread(lambda: read(decode_json(raw)))
    return read(decode_json(raw))


def _too_deep() -> InvalidRequest:
    return InvalidRequest(f"The body is nested more than {MAX_JSON_DEPTH} levels deep.", code="invalid_json")


def _check_tree(data: Any, *, surrogates: bool) -> None:
    """Walk the decoded value without recursion: its size, its depth, and its strings when asked."""
    todo: list[tuple[Any, int]] = [(data, 1)]
    values = 1
    while todo:
        value, depth = todo.pop()
        if isinstance(value, dict | list):
            if depth > MAX_JSON_DEPTH:
                raise _too_deep()
            values += len(value)  # counted before they are walked: a huge array costs nothing
            if values > MAX_JSON_VALUES:
                raise InvalidRequest(
                    f"The body holds more than {MAX_JSON_VALUES:,} JSON values.", code="invalid_json"
                )
            if isinstance(value, list):
                todo.extend((v, depth + 1) for v in value)
                continue
            if surrogates:
                todo.extend((k, depth) for k in value)
            todo.extend((v, depth + 1) for v in value.values())
        elif surrogates and isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidRequest(
                    "The body holds a lone UTF-16 surrogate (such as \\ud800), which is not text.",
                    code="invalid_json",
                ) from None


class Prediction(Wire):
    type: Literal["content"] = "content"
    content: str | list[dict] = ""

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(p.get("text", "") for p in self.content if isinstance(p, dict))


class WhizOptions(Wire):
    """whiz's own request options, namespaced under `whiz`."""

    speculation: bool | None = None
    """False turns drafting off for this request (output is the same either way)."""
    timeline: bool | None = None
    """True adds `whiz.timeline` to the finished response: its decode steps, for a speed plot."""
    tool_grammar: bool | None = None
    """False lets this request's tool calls go unconstrained (the server's --tool-grammar is the
    default)."""


def required_tool(choice: str | dict | None) -> str | None:
    """An OpenAI `tool_choice` as the backend reads it: "required", a function's name, or None
    (auto, none, or a shape this server does not know)."""
    if choice == "required":
        return "required"
    if isinstance(choice, dict):
        inner = choice.get("function") if isinstance(choice.get("function"), dict) else choice
        name = inner.get("name")
        return name if isinstance(name, str) and name else None
    return None


def wants_tool_grammar(whiz: WhizOptions | None, default: bool) -> bool:
    """Whether a request's tool calls are constrained: its `whiz.tool_grammar`, else `default`."""
    return default if whiz is None or whiz.tool_grammar is None else whiz.tool_grammar


@dataclass(frozen=True)
class TurnDefaults:
    """What a turn gets where its request says nothing: one object for every API's service."""

    model_name: str
    """The model id answers name (the request's own `model` wins)."""
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int | None = None
    """The output cap of a request that sets none (None: to the end of the context)."""
    tool_grammar: bool = True
    """Constrain tool calls to the tools' schemas unless the request opts out."""


class SamplingFields(Wire):
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = Field(default=None, ge=-INT64, lt=INT64)
    """Any 64-bit integer, as OpenAI accepts; a negative one is used modulo 2**64."""
    stream: bool = False
    prediction: Prediction | None = None
    whiz: WhizOptions | None = None
    prompt_cache_key: str | None = None

    def speculation(self) -> bool:
        return not (self.whiz and self.whiz.speculation is False)

    def tool_grammar(self, default: bool) -> bool:
        return wants_tool_grammar(self.whiz, default)

    def wants_timeline(self) -> bool:
        return bool(self.whiz and self.whiz.timeline)

    def sampling(self, defaults: SamplingParams) -> SamplingParams:
        """The request's sampling settings, the server's defaults where it sets none."""
        return SamplingParams(
            temperature=defaults.temperature if self.temperature is None else self.temperature,
            top_p=defaults.top_p if self.top_p is None else self.top_p,
            top_k=defaults.top_k,
            seed=None if self.seed is None else self.seed % 2**64,  # numpy takes no negative seed
        )


# -- Chat Completions ------------------------------------------------------------------------------


class ChatFunction(Wire):
    name: str
    arguments: str | dict = ""


class ChatToolCall(Wire):
    id: str = ""
    type: str = "function"
    function: ChatFunction


class ChatMessage(Wire):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict] | None = None
    tool_calls: list[ChatToolCall] | None = None
    tool_call_id: str | None = None


class ChatToolFunction(Wire):
    name: str
    description: str = ""
    parameters: dict = Field(default_factory=dict)


class ChatTool(Wire):
    type: Literal["function"] = "function"
    function: ChatToolFunction


class StreamOptions(Wire):
    include_usage: bool = False


class ChatRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    stream_options: StreamOptions | None = None
    tools: list[ChatTool] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_choice: str | dict | None = None
    n: int = Field(default=1, ge=1, le=64)
    """Candidates to generate; the server's --slots bounds it further."""
    continue_final_message: bool = False
    """The reply goes on from the last message, an assistant's, instead of starting a new one (the
    name vLLM gives it): a client that begins the reply for the model ("```python\ndef f(x):") gets
    the rest of it. The reply's text is the continuation alone."""

    _stop = field_validator("stop")(bounded_stops(MAX_STOP))

    def stop_list(self) -> list[str]:
        return stop_list(self.stop)

    def limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def tool_list(self) -> list[Tool]:
        if self.tool_choice == "none":
            return []
        return [
            Tool(t.function.name, t.function.description, t.function.parameters) for t in self.tools or []
        ]

    def conversation(self) -> list[Message]:
        messages = [_chat_message(m, i) for i, m in enumerate(self.messages)]
        if self.continue_final_message:
            last = messages[-1]
            if last.role != "assistant" or last.tool_calls or not last.content:
                raise InvalidRequest(
                    "continue_final_message needs the last message to be the assistant's, with text "
                    "and no tool calls: it is the start of the reply to continue.",
                    param="continue_final_message",
                )
        return messages


def _text(content: str | list | None, param: str) -> str:
    """Message content as text: a string, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for i, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("text", ""), str):
            raise InvalidRequest(
                "Each content part must be an object with a text field.", param=f"{param}.{i}"
            )
        kind = part.get("type", "text")
        if kind == "input_file":
            parts.append(file_text(part, f"{param}.{i}"))
            continue
        if kind in IMAGE_PARTS:
            raise refuse_image(kind, f"{param}.{i}.type")
        if kind not in ("text", "input_text", "output_text", "refusal"):
            raise InvalidRequest(
                f"Content parts of type '{kind}' are not supported.", param=f"{param}.{i}.type"
            )
        parts.append(part.get("text") or part.get("refusal") or "")
    return "".join(parts)


def _require_strings(item: dict[str, Any], kind: str, param: str, keys: tuple[str, ...]) -> None:
    for key in keys:
        if not isinstance(item.get(key), str):
            raise InvalidRequest(f"A {kind} item needs a string {key}.", param=f"{param}.{key}")


def _arguments(value: str | dict) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _chat_message(m: ChatMessage, i: int) -> Message:
    content = _text(m.content, f"messages.{i}.content")
    role = "system" if m.role == "developer" else m.role
    if role == "assistant":
        calls = tuple(
            ToolCall(c.id, c.function.name, _arguments(c.function.arguments)) for c in m.tool_calls or []
        )
        return Message("assistant", content, calls)
    if role == "tool":
        return Message("tool", content, tool_call_id=m.tool_call_id)
    return Message(role, content)


# -- Responses -------------------------------------------------------------------------------------


class ResponsesRequest(SamplingFields):
    input: str | list[dict] = Field(default_factory=list)
    instructions: str | None = None
    previous_response_id: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    tools: list[dict] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_choice: str | dict | None = None
    store: bool = True
    generate: bool = True
    metadata: dict[str, str] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    """auto: when the conversation does not fit the context window, drop its oldest items until it
    does (OpenAI's meaning); disabled (the default): a 400 context_length_exceeded instead."""
    parallel_tool_calls: bool = True
    max_tool_calls: StrictInt | None = Field(default=None, ge=1)
    """At most this many tool calls in the response (the specification's minimum is 1); the model's
    calls past it are dropped (`responses.ToolCallLimit`)."""
    safety_identifier: str | None = None
    background: bool = False

    @field_validator("background")
    @classmethod
    def _foreground(cls, background: bool) -> bool:
        if background:
            raise ValueError(
                "background responses are not supported: whiz answers while the request is open "
                "(stream it, or use the WebSocket mode)"
            )
        return background

    @field_validator("tools")
    @classmethod
    def _bounded_tools(cls, tools: list[dict] | None) -> list[dict] | None:
        # A namespace's tools are each shown to the model and each get a grammar rule: they count.
        inner = [t.get("tools") for t in tools or [] if isinstance(t, dict) and t.get("type") == "namespace"]
        count = len(tools or []) - len(inner) + sum(len(t) if isinstance(t, list) else 0 for t in inner)
        if count > MAX_TOOLS:
            raise ValueError(f"at most {MAX_TOOLS} tools are allowed, those inside namespaces included")
        return tools

    @field_validator("metadata")
    @classmethod
    def _bounded_metadata(cls, metadata: dict[str, str] | None) -> dict[str, str] | None:
        if metadata is None:
            return None
        if len(metadata) > MAX_METADATA_PAIRS:
            raise ValueError(f"metadata may hold at most {MAX_METADATA_PAIRS} pairs")
        if any(len(k) > MAX_METADATA_KEY_CHARS for k in metadata):
            raise ValueError(f"metadata keys may hold at most {MAX_METADATA_KEY_CHARS} characters")
        if any(len(v) > MAX_METADATA_VALUE_CHARS for v in metadata.values()):
            raise ValueError(f"metadata values may hold at most {MAX_METADATA_VALUE_CHARS} characters")
        return metadata

    def tool_list(self) -> list[Tool]:
        """The tools as the model sees them: function tools; custom (free-form) tools as a function
        of one string, `input` (the Codex CLI's `apply_patch`); the function tools inside a
        `namespace` (MCP servers' tools). Kinds with no local meaning (`web_search`,
        `image_generation`, ...) are left out: `ignored_tools` names them."""
        if self.tool_choice == "none":
            return []
        tools = []
        for i, t in enumerate(self.tools or []):
            kind = _tool_kind(t, f"tools.{i}")
            if kind == "function":
                tools.append(_function_tool(t, f"tools.{i}"))
            elif kind == "custom":
                tools.append(_custom_tool(t, f"tools.{i}"))
            elif kind == "namespace":
                for j, inner in enumerate(t.get("tools") or []):
                    if _tool_kind(inner, f"tools.{i}.tools.{j}") == "function":
                        tools.append(_function_tool(inner, f"tools.{i}.tools.{j}"))
        return tools

    def custom_tool_names(self) -> frozenset[str]:
        """The custom tools: a call to one is a `custom_tool_call` item, its input free text."""
        return frozenset(
            t["name"] for t in self.tools or [] if isinstance(t, dict) and t.get("type") == "custom"
        )

    def ignored_tools(self) -> list[str]:
        """The kinds of tool left out of the prompt (only a hosted service runs them)."""
        kept = ("function", "custom", "namespace")
        return sorted(
            {t["type"] for t in self.tools or [] if isinstance(t, dict) and t.get("type") not in kept}
        )

    def input_messages(self) -> list[Message]:
        """The input items as messages (function calls and their outputs included)."""
        return input_messages(self.input)


class CompactRequest(Wire):
    """`POST /v1/responses/compact`: a conversation to compact into a shorter input window."""

    model: str
    input: str | list[dict] = Field(default_factory=list)
    previous_response_id: str | None = None
    instructions: str | None = None
    prompt_cache_key: str | None = None

    def input_messages(self) -> list[Message]:
        return input_messages(self.input)


def input_messages(items: str | list[dict]) -> list[Message]:
    """Input items as messages (function calls and their outputs included)."""
    if isinstance(items, str):
        return [Message("user", items)]
    out: list[Message] = []
    for i, item in enumerate(items):
        out.extend(_item_messages(item, f"input.{i}"))
    return _merge_calls(out)


def _tool_kind(tool: Any, param: str) -> str:
    if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
        raise InvalidRequest("Each tool must be an object with a type.", param=param)
    return tool["type"]


def _function_tool(tool: dict, param: str) -> Tool:
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise InvalidRequest("A function tool needs a name.", param=f"{param}.name")
    params = tool.get("parameters") or {}
    if not isinstance(params, dict):
        raise InvalidRequest("Tool parameters must be a JSON schema object.", param=f"{param}.parameters")
    return Tool(tool["name"], tool.get("description") or "", params)


SUMMARY_HEADER = "Summary of the conversation so far:\n"
"""How a compaction item reads to the model: its summary, said by the assistant, so that the kept
user messages and the summary alternate as a conversation does."""


CUSTOM_INPUT = "input"
"""The one argument a custom tool is called with, as the model sees it: its free-text input."""


def _custom_tool(tool: dict, param: str) -> Tool:
    """A free-form tool as a function of one string; its grammar, where it has one, is shown in the
    description, so the model knows the shape of the text."""
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise InvalidRequest("A custom tool needs a name.", param=f"{param}.name")
    description = str(tool.get("description") or "")
    fmt = tool.get("format") if isinstance(tool.get("format"), dict) else {}
    if fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        description += f"\nThe input follows this {fmt.get('syntax', '')} grammar:\n{fmt['definition']}"
    schema = {
        "type": "object",
        "properties": {CUSTOM_INPUT: {"type": "string", "description": "The tool's input, as plain text."}},
        "required": [CUSTOM_INPUT],
    }
    return Tool(tool["name"], description.strip(), schema)


def custom_input(call: ToolCall) -> str:
    """The free-text input of a call to a custom tool (the model may also give the text alone)."""
    args = call.arguments_object()
    if isinstance(args, dict):
        value = args.get(CUSTOM_INPUT, next(iter(args.values()), "") if len(args) == 1 else "")
        return value if isinstance(value, str) else json.dumps(value)
    return args if isinstance(args, str) else call.arguments


def _item_messages(item: Any, param: str) -> list[Message]:
    if not isinstance(item, dict):
        raise InvalidRequest("Each input item must be an object.", param=param)
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise InvalidRequest(
                "A message's role must be user, assistant, system or developer.", param=f"{param}.role"
            )
        text = _text(item.get("content"), f"{param}.content")
        return [Message("system" if role == "developer" else role, text)]
    if kind in ("function_call", "custom_tool_call"):
        _require_strings(item, kind, param, ("call_id", "name"))
        if kind == "function_call":
            arguments = _arguments(item.get("arguments") or "")
        else:
            text = item.get("input") if isinstance(item.get("input"), str) else ""
            arguments = json.dumps({CUSTOM_INPUT: text}, ensure_ascii=False)
        return [Message("assistant", "", (ToolCall(item["call_id"], item["name"], arguments),))]
    if kind in ("function_call_output", "custom_tool_call_output"):
        _require_strings(item, kind, param, ("call_id",))
        output = item.get("output", "")
        text = output if isinstance(output, str) else _text(output, f"{param}.output")
        return [Message("tool", text, tool_call_id=item["call_id"])]
    if kind == "compaction":
        summary = compaction_summary(item.get("encrypted_content"))
        if summary is None:
            raise InvalidRequest(
                "This compaction item was not made by this server: whiz reads only the compaction "
                "items its own /v1/responses/compact returned. Send the conversation's items instead.",
                param=f"{param}.encrypted_content",
            )
        return [Message("assistant", SUMMARY_HEADER + summary)]
    if kind in ("reasoning", "item_reference", "web_search_call", "image_generation_call"):
        return []  # nothing a local model can use
    raise InvalidRequest(f"Input items of type '{kind}' are not supported.", param=f"{param}.type")


def check_tool_outputs(items: str | list[dict], earlier_calls: set[str]) -> None:
    """Every tool output in `items` answers a call made before it: in `earlier_calls` (the
    conversation it continues) or an earlier item. An output with no call is a 400 naming it: the
    model would be shown a result of something it never asked for."""
    if isinstance(items, str):
        return
    calls = set(earlier_calls)
    for i, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind in ("function_call", "custom_tool_call"):
            calls.add(item.get("call_id"))
        elif kind in ("function_call_output", "custom_tool_call_output") and item.get("call_id") not in calls:
            raise InvalidRequest(
                f"No tool call with call_id '{item.get('call_id')}' comes before this output in the "
                "conversation.",
                param=f"input.{i}.call_id",
                code="tool_call_not_found",
            )


def _merge_calls(messages: list[Message]) -> list[Message]:
    """Fold consecutive assistant pieces (text, then calls) into one assistant message."""
    out: list[Message] = []
    for m in messages:
        prev = out[-1] if out else None
        if m.role == "assistant" and prev is not None and prev.role == "assistant" and m.tool_calls:
            out[-1] = Message("assistant", prev.content, prev.tool_calls + m.tool_calls)
        else:
            out.append(m)
    return out


def input_chars(req: ChatRequest | ResponsesRequest) -> int:
    """About how much text a request asks to tokenize (a bound, to decide where to tokenize it)."""
    prediction = req.prediction.content if req.prediction else ""
    parts: Any = [req.messages] if isinstance(req, ChatRequest) else [req.input, req.instructions]
    # The tools' schemas are rendered into the prompt too, and can be megabytes of it.
    return len(str(prediction)) + sum(len(str(p)) for p in [*parts, req.tools] if p)
