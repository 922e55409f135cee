"""The conversation as the model sees it, shared by the Chat Completions and Responses APIs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """A function call the model made. `arguments` is JSON text, as OpenAI sends it."""

    id: str
    name: str
    arguments: str

    def arguments_object(self) -> Any:
        try:
            return json.loads(self.arguments) if self.arguments else {}
        except json.JSONDecodeError:
            return self.arguments


@dataclass(frozen=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True)
class Tool:
    """A function the model may call (OpenAI's function tool)."""

    name: str
    description: str = ""
    parameters: dict = field(default_factory=dict)

    def as_chat_tool(self) -> dict:
        """The shape Qwen's template lists inside <tools>: OpenAI's chat-completions tool."""
        fn: dict[str, Any] = {"name": self.name}
        if self.description:
            fn["description"] = self.description
        fn["parameters"] = self.parameters or {"type": "object", "properties": {}}
        return {"type": "function", "function": fn}
