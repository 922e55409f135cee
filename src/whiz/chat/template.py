"""Qwen's ChatML, rendered to tokens one message at a time.

Rendering per message (instead of one Jinja pass) keeps prompts prefix-stable: turn N+1's tokens
start with turn N's tokens exactly, including the assistant tokens the model actually sampled,
which re-tokenizing the reply text would not always reproduce. That is what lets a follow-up
turn find its whole history in the KV cache. Special tokens delimit every message, so per-message
tokenization equals tokenizing the whole text.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence

from whiz.chat.messages import Message, Tool
from whiz.seams import Tokenizer

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
TOOLS_PREAMBLE = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_POSTAMBLE = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    'within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
    '"arguments": <args-json-object>}\n</tool_call>'
)
ASSISTANT_START = "<|im_start|>assistant\n"


def _tojson(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def assistant_body(message: Message) -> str:
    """What the model writes for an assistant message, between its header and <|im_end|>."""
    parts = [message.content] if message.content else []
    for call in message.tool_calls:
        arguments = _tojson(call.arguments_object())
        parts.append(f'<tool_call>\n{{"name": "{call.name}", "arguments": {arguments}}}\n</tool_call>')
    return "\n".join(parts)


class ChatTemplate:
    """Turns messages into prompt tokens, reusing the exact tokens of replies it generated.

    A reply's tokens are reused only for the tenant it was generated for: another key's history
    with the same text gets it tokenized afresh, so its prompt's length cannot tell that the text
    was a reply to someone else.
    """

    def __init__(self, tokenizer: Tokenizer, *, remember: int = 512):
        self.tokenizer = tokenizer
        self._generated: OrderedDict[tuple[str | None, str], list[int]] = OrderedDict()
        self._remember = remember

    def remember(self, body: str, tokens: list[int], tenant: str | None = None) -> None:
        """Record the sampled tokens of a reply, so a client resending it hits the cache."""
        self._generated[(tenant, body)] = list(tokens)
        self._generated.move_to_end((tenant, body))
        while len(self._generated) > self._remember:
            self._generated.popitem(last=False)

    def system_text(self, system: str | None, tools: Sequence[Tool]) -> str:
        text = system if system is not None else DEFAULT_SYSTEM
        if tools:
            text += TOOLS_PREAMBLE
            text += "".join("\n" + _tojson(t.as_chat_tool()) for t in tools)
            text += TOOLS_POSTAMBLE
        return f"<|im_start|>system\n{text}<|im_end|>\n"

    def encode(
        self,
        messages: Sequence[Message],
        tools: Sequence[Tool] = (),
        *,
        add_generation_prompt: bool = True,
        tenant: str | None = None,
    ) -> list[int]:
        """The prompt tokens for a conversation (a leading system message becomes the system turn)."""
        system = None
        rest = list(messages)
        if rest and rest[0].role == "system":
            system = rest.pop(0).content
        tokens = self.tokenizer.encode(self.system_text(system, tools))
        tokens += self.encode_turns(rest, tenant=tenant)
        if add_generation_prompt:
            tokens += self.tokenizer.encode(ASSISTANT_START)
        return tokens

    def encode_turns(self, messages: Sequence[Message], *, tenant: str | None = None) -> list[int]:
        """Tokens for messages after the system turn (`tenant`'s own replies with their own tokens)."""
        enc = self.tokenizer.encode
        tokens: list[int] = []
        i = 0
        while i < len(messages):
            m = messages[i]
            if m.role == "assistant":
                body = assistant_body(m)
                known = self._generated.get((tenant, body))
                tokens += enc(ASSISTANT_START)
                tokens += known if known is not None else enc(body)
                tokens += enc("<|im_end|>\n")
            elif m.role == "tool":
                # Consecutive tool results share one user turn, as Qwen's template renders them.
                text = "<|im_start|>user"
                while i < len(messages) and messages[i].role == "tool":
                    text += f"\n<tool_response>\n{messages[i].content}\n</tool_response>"
                    i += 1
                tokens += enc(text + "<|im_end|>\n")
                continue
            else:
                tokens += enc(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n")
            i += 1
        return tokens
