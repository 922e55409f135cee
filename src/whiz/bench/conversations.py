"""The ways a benchmark holds a conversation with a server, behind one small interface.

Over WebSocket mode a follow-up sends only the new message and chains `previous_response_id`; over
HTTP (Chat Completions, or Anthropic's Messages) every turn resends the whole history. Same calls,
so the bench compares them turn for turn.
"""

from __future__ import annotations

from typing import Any, Protocol

from whiz.client import Exchange, HttpClient, ResponsesSocket, user_message


class Conversation(Protocol):
    async def prime(self, history: list[dict[str, Any]]) -> None:
        """Load the instructions and `history` without generating, so the next turn is warm."""
        ...

    async def say(self, text: str, max_output_tokens: int) -> Exchange:
        """One user turn at temperature 0; the reply joins the conversation."""
        ...

    async def close(self) -> None: ...


class SocketConversation:
    """A conversation on its own WebSocket connection (the server keeps its KV cache)."""

    def __init__(self, sock: ResponsesSocket, model: str, instructions: str):
        self.sock = sock
        self.model = model
        self.instructions = instructions
        self.last_id: str | None = None

    @classmethod
    async def open(
        cls, target: str, api_key: str | None, model: str, instructions: str
    ) -> SocketConversation:
        return cls(await ResponsesSocket.open(target, api_key), model, instructions)

    async def prime(self, history: list[dict[str, Any]]) -> None:
        # A warm-up needs some input; with no history the opener stands in for it.
        turn = await self.send(history or [user_message("Let's begin.")], generate=False)
        self.last_id = turn.id

    async def say(self, text: str, max_output_tokens: int) -> Exchange:
        turn = await self.send([user_message(text)], max_output_tokens=max_output_tokens, temperature=0)
        self.last_id = turn.id
        return turn

    async def send(self, items: list[dict[str, Any]], **fields: Any) -> Exchange:
        """One `response.create` chained on this conversation; does not move `last_id`."""
        return await self.sock.run(
            model=self.model,
            instructions=self.instructions,
            input=items,
            previous_response_id=self.last_id,
            **fields,
        )

    async def close(self) -> None:
        await self.sock.close()


class ChatConversation:
    """A conversation over `POST /v1/chat/completions`: every turn resends everything."""

    def __init__(self, http: HttpClient, model: str, instructions: str):
        self.http = http
        self.model = model
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": instructions}]

    async def prime(self, history: list[dict[str, Any]]) -> None:
        self.messages += [{"role": m["role"], "content": m["content"]} for m in history]
        if len(self.messages) == 1:
            self.messages.append({"role": "user", "content": "Let's begin."})
        # One throwaway reply loads the history into whatever prefix cache the server has.
        await self._send(1)

    async def say(self, text: str, max_output_tokens: int) -> Exchange:
        self.messages.append({"role": "user", "content": text})
        turn = await self._send(max_output_tokens)
        self.messages.append({"role": "assistant", "content": turn.text})
        return turn

    async def _send(self, max_tokens: int) -> Exchange:
        body = {"model": self.model, "messages": self.messages, "max_tokens": max_tokens, "temperature": 0}
        return await self.http.chat_turn(body)

    async def close(self) -> None:
        """Nothing to close: the HTTP client is shared and closed by its owner."""


class MessagesConversation(ChatConversation):
    """A conversation over Anthropic's `POST /v1/messages` (what Claude Code speaks): the same
    history as Chat Completions, with the instructions as the top-level `system`."""

    async def _send(self, max_tokens: int) -> Exchange:
        system, *messages = self.messages
        body = {"model": self.model, "system": system["content"], "messages": messages}
        return await self.http.messages_turn({**body, "max_tokens": max_tokens, "temperature": 0})
